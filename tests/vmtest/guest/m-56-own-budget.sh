# vmtest-checks: 1
# vmtest-drive: throttling.iops-total=500,throttling.bps-total=16777216
# How much of its iocost budget a protected reader's own I/O may use
# (issue 56; the tuner's OWN_LOAD, loader/src/tune/controller/measurement.rs):
# a reader of 4 KiB random reads at a tenth of the device's requests (QD1,
# io.weight 1000) beside a steady hog of 128 KiB or 4 KiB random reads
# (QD32, io.weight 100), at fixed vrates on the caps' model, each 10 s of
# the reader's fio: its p99 from submission (slat: iocost's hold in
# io_submit; clat: the device; lat: both) and the hog's throughput; then at
# two vrates with other latency targets (iocost's period is 2x rlat at
# rpct=100). Prints MAP lines; asserts nothing but that it ran.
#   VMTEST_ONLY=m-56-own-budget KERNELS=6.1 tests/vmtest/run.sh
. "$(dirname "$0")/lib.sh"
T=$SCRATCH/own-budget; rm -rf $T; mkdir -p $T
pre_qos=$(qos)
caps_setup
# run BS VRATE RLAT_US: vrate pinned as the tuner pins it (lib.sh's
# pin_vrate, with the latency target given).
run() {
  local bs=$1 v=$2 rl=$3
  bash -c "echo \$\$ > $CG/md-hog/cgroup.procs; exec fio --name=hog --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=$bs --iodepth=32 --offset=1G --size=512M --time_based --runtime=16 --output-format=json --output=$T/hog.json" > /dev/null 2>&1 & local h=$!
  sleep 1
  echo "$MM enable=1 ctrl=user rpct=100 rlat=1 wpct=100 wlat=1 min=$v max=$v" > $CG/io.cost.qos
  for _ in $(seq 300); do [ "$(vrate $MM)" = "$(printf %.2f $v)" ] && break; sleep 0.01; done
  echo "$MM enable=1 ctrl=user rpct=100 rlat=$rl wpct=100 wlat=$rl min=$v max=$v" > $CG/io.cost.qos
  sleep 2
  bash -c "echo \$\$ > $CG/md-lc/cgroup.procs; exec fio --name=lc --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=1 --offset=0 --size=512M --time_based --runtime=10 --rate_iops=$((CAP_IOPS / 10)) --lat_percentiles=1 --clat_percentiles=1 --slat_percentiles=1 --output-format=json --output=$T/lc.json" > /dev/null 2>&1
  wait $h
  python3 - "$bs" "$v" "$rl" $T/lc.json $T/hog.json "$CAP_IOPS" "$CAP_BPS" <<'PY'
import json, sys
bs, v, rl = sys.argv[1:4]
r = json.load(open(sys.argv[4]))["jobs"][0]["read"]
h = json.load(open(sys.argv[5]))["jobs"][0]["read"]
iops, bps = float(sys.argv[6]), float(sys.argv[7])
def p(k): return r[k]["percentile"]["99.000000"] / 1e6
# The reader's own I/O against its budget: its reads' cost in the caps'
# model over vrate x its weight's share (1000 of 1100).
own = r["iops"] * (1 / iops + 4096 / bps) / (float(v) / 100 * 1000 / 1100)
print(f"MAP bs={bs} vrate={v} rlat_us={rl}: reader {r['total_ios']} reads, own I/O {own:.0%} of its budget, p99 slat {p('slat_ns'):.2f} clat {p('clat_ns'):.2f} lat {p('lat_ns'):.2f} ms; hog {h['bw_bytes']/1e6:.2f} MB/s {h['iops']:.1f}/s")
PY
}
for bs in 128k 4k; do
  for v in 10 15 20 30 50; do run $bs $v 25000; done
done
for v in 15 30; do for rl in 1000 5000 250000; do run 128k $v $rl; done; done
echo "$pre_qos" | sed 's/^/  before: /'
caps_cleanup
ok "m-56-own-budget ran its $(( 2 * 5 + 6 )) fixed QoS (MAP lines above)" "[ -s $T/lc.json ]"
