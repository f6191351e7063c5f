# vmtest-checks: 4
# vmtest-kernels: 6.1
# vmtest-drive: throttling.iops-total=3000,throttling.bps-total=41943040
# vmtest-beside: yes
# `iowarden tune --model` safety on real iocost (the fit itself: m-47-model.sh):
# kill -9 after it wrote io.cost.model, and the next iowarden restores both
# knobs; a device that vanishes mid-run (null_blk removed) stops it with the
# reason and no journal left; a bio-based device (brd) and a step factor
# below 1 are refused; with no load every model decision is 'insufficient'
# and nothing changes. One kernel line, as t-47: what it checks is the
# loader's (journal, restore, sysfs reads every line shares); on 5.10 and
# 6.12 t-40 and t-46 write, journal and restore io.cost.model and qos.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
IW=$IOWARDEN_BIN
ST=$SCRATCH/model-safety-state; rm -rf $ST
T=$SCRATCH/model-safety; rm -rf $T; mkdir -p $T
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/md-lc $CG/md-hog
echo "$MM enable=0 ctrl=auto" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.model
pre_qos=$(qos); pre_model=$(model)
# The hog (lib.sh's cycle): the six patterns of the model.
SIX=("randread 4k 64" "read 4k 64" "read 1M 8" "randwrite 4k 64" "write 4k 64" "write 1M 8")

# (4) kill -9 after the model was written: the next run restores both knobs.
# The drive is t-47's (a guest shared with it): capped at 3000 requests/s,
# the hog's 4 KiB patterns saturate the device and the fit finds rrandiops
# 3x the model's. On the default drive they are the guest CPU's speed, the
# device's queue at times below the saturation depth: on 2026-12-06 with a
# warm host page cache only the 1 MiB reads (one size: no term) saturated
# in 170 s, and no model was written, with this build and the one before.
cycle 80 & hog=$!
# rrandiops 10x below what this device does; a loose error bound, so that
# a write comes soon (the journal is under test here, not the fit).
echo "$MM model=linear rbps=250000000 rseqiops=10000 rrandiops=1000 wbps=270000000 wseqiops=9000 wrandiops=7000" > $CG/io.cost.model
start_model=$(model)
"$IW" tune --device $DEV --protect /md-lc --slo read-p99=2000ms --vrate-max 800 --start 800 --period 1s --model --model-max-error 0.5 \
  --listen 127.0.0.1:9633 --state-dir $ST > $T/crash.jsonl 2> $T/crash.log & tp=$!
for _ in $(seq 700); do [ "$(model)" != "$start_model" ] && break; sleep 0.1; done
crash_model=$(model); crash_qos=$(qos)
kill -9 $tp; wait $tp 2>/dev/null
stop_hog $hog
"$IW" run --device $DEV --listen 127.0.0.1:9634 --duration 1s --state-dir $ST > /dev/null 2> $T/recover.log
echo "  crash: model while tuning '$crash_model', qos '$crash_qos'; after restart model '$(model)' qos '$(qos)'"
ok "tune --model: kill -9 after a model write; the next iowarden restores model and qos" "[ \"\$crash_model\" != \"\$start_model\" ] && [ \"\$(model)\" = \"\$start_model\" ] && [ \"\$(qos)\" = \"\$pre_qos\" ] && grep -q 'restored' $T/recover.log"
echo "$MM ctrl=auto" > $CG/io.cost.model

# A device that vanishes mid-run (null_blk removed): stops, says why, leaves no journal.
if modprobe null_blk queue_mode=2 nr_devices=1 gb=1 submit_queues=2 2> $T/nullb.err; then
  NM=$(dev_mm nullb0)
  echo "$NM enable=0 ctrl=auto" > $CG/io.cost.qos
  "$IW" tune --device nullb0 --protect /md-lc --slo read-p99=2000ms --period 1s --start 50 --model \
    --listen 127.0.0.1:9635 --state-dir $ST > /dev/null 2> $T/gone.log & tp=$!
  qos_wait "$NM" 'max=50.00' 10
  rmmod null_blk; wait $tp; grc=$?
  echo "  vanished: rc $grc: $(grep -iE 'vanished|gone' $T/gone.log | tr '\n' ' ' | cut -c1-250)"
  ok "tune --model: a vanished device stops it with the reason, nothing left to restore" "[ $grc -ne 0 ] && grep -q 'device nullb0 ($NM) vanished' $T/gone.log && [ -z \"\$(ls $ST/journal-* 2>/dev/null)\" ] && [ \"\$(qos)\" = \"\$pre_qos\" ]"
else
  ok "null_blk loads" false; cat $T/nullb.err
fi

# Bad input: a device iocost cannot run on (brd is bio-based), a bad guard setting.
modprobe brd rd_nr=1 rd_size=65536 2>/dev/null
"$IW" tune --device ram0 --protect /md-lc --slo read-p99=2ms --model --state-dir $ST --listen 127.0.0.1:9636 --duration 3s > /dev/null 2> $T/bad1.log; b1=$?
"$IW" tune --device $DEV --protect /md-lc --slo read-p99=2ms --model --model-max-step 0.5 --state-dir $ST --listen 127.0.0.1:9636 --duration 3s > /dev/null 2> $T/bad2.log; b2=$?
echo "  bad: ram0 rc $b1: $(tail -1 $T/bad1.log | cut -c1-200); max-step 0.5 rc $b2: $(tail -1 $T/bad2.log)"
ok "tune --model refuses a device without iocost support and a bad step, nothing changed" "[ $b1 -ne 0 ] && grep -q 'ram0 has no blk-mq queue' $T/bad1.log && [ $b2 -ne 0 ] && grep -q 'above 1' $T/bad2.log && [ \"\$(qos)\" = \"\$pre_qos\" ] && [ \"\$(model)\" = \"\$pre_model\" ]"
rmmod brd 2>/dev/null
# Too few samples: no load, a few periods: every model decision is 'insufficient', the model unchanged.
# --start: without it the first period with I/O enough to judge would pin
# (docs/cost-model.md#tune), and without load there is none, so the model
# loop, which judges pinned vrates, would not run.
"$IW" tune --device $DEV --protect /md-lc --slo read-p99=2ms --period 1s --start 50 --model --listen 127.0.0.1:9637 --state-dir $ST --duration 6s > $T/idle.jsonl 2> $T/idle.log; irc=$?
acts=$(python3 -c 'import json,sys; print(" ".join(sorted({json.loads(l)["model_action"] for l in open(sys.argv[1]) if "model_action" in l})))' $T/idle.jsonl)
echo "  idle: rc $irc; model actions: $acts; $(grep -o 'insufficient .*' $T/idle.log | head -1 | cut -c1-200)"
ok "tune --model without load: says the fit has too few samples and changes nothing" "[ $irc -eq 0 ] && [ '$acts' = insufficient ] && grep -q 'saturated windows, 6 needed' $T/idle.log && [ \"\$(model)\" = \"\$pre_model\" ]"

echo "$MM enable=0" > $CG/io.cost.qos; echo "$MM ctrl=auto" > $CG/io.cost.model
rmdir $CG/md-lc $CG/md-hog 2>/dev/null
echo "  after: qos '$(qos)' model '$(model)'"
