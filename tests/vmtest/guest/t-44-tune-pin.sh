# vmtest-checks: 1
# vmtest-kernels: 6.1 6.12
# `iowarden tune`'s vrate pin takes hold in the kernel: with its bounds at
# 50 % and a QD1 reader in the protected cgroup (iocost moves vrate only
# while I/O flows), io.stat's cost.vrate reaches 50 %
# (loader/src/knobs/vrate_pin.rs: 1 µs latency targets until it does, then
# the device's own with min = max = 50).
# Not on 5.10: its iocost ignores the user's vrate min in any period whose
# requests waited more than 5 % of it to be allocated ("rq_wait signal is
# always reliable", dropped in later kernels), so the pin's first step
# drives vrate below the pin (34-38 % here, with or without t-45's hog)
# and iowarden's pin does not hold there yet.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
IW=$IOWARDEN_BIN
ST=$SCRATCH/tune-pin-state; rm -rf $ST
T=$SCRATCH/tune-pin; rm -rf $T; mkdir -p $T
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/tn-pin
echo "$MM enable=0" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.qos
# The reader starts after the tuner has attached and stops before it
# detaches: a tracepoint switched on or off under I/O patches the kernel's
# text live, which multi-threaded TCG can run stale (a 6.12 guest panicked
# on "Oops: int3" in blk_mq_end_request_batch: README).
"$IW" tune --device $DEV --protect /tn-pin --slo read-p99=5ms --period 1s --start 50 --vrate-min 50 --vrate-max 50 \
  --listen 127.0.0.1:9628 --state-dir $ST > /dev/null 2> $T/tune.log & TP=$!
ready http://127.0.0.1:9628/metrics "$TP"
bash -c "echo \$\$ > $CG/tn-pin/cgroup.procs; exec fio --name=pin --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=1 --size=512M --time_based --runtime=60" > /dev/null 2>&1 & FP=$!
qos_wait "$MM" 'max=50.00' 20 '[ "$(vrate $MM)" = 50.00 ]'
pin_qos=$(qos); pin_vrate=$(vrate $MM)
kill $FP; wait $FP 2>/dev/null
kill -TERM $TP; wait $TP
echo "  pin: qos '$pin_qos', io.stat cost.vrate ${pin_vrate}%; after: qos '$(qos)'"
grep -E '^iowarden tune:' $T/tune.log | sed 's/^/  /' | cut -c1-200 | tail -3
ok "tune: its pin takes hold in the kernel (io.stat cost.vrate ${pin_vrate}% for 50)" "[ '$pin_vrate' = 50.00 ]"
echo "$MM enable=0" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.qos
rmdir $CG/tn-pin
