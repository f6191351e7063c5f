# vmtest-checks: 2
# vmtest-drive: throttling.iops-total=500,throttling.bps-total=16777216
# Issue 56, part 2: is the device point QEMU's throttle makes its caps,
# max(requests/iops, bytes/bps), for each pattern alone and right after a
# change of pattern (as m-47's workloads change every 4 s)? A bucket that
# passes more than its rate in a burst would make the fit's windows and
# the profile's 128 MiB blocks disagree. Prints, for each pattern alone
# (2 s ramp, then 12 s), requests/s and MB/s; then, after 4 s of the
# other pattern, the first second and the first 4 s. Other points:
# VMTEST_DRIVE (run.sh).
. "$(dirname "$0")/lib.sh"
nomerges=$(cat /sys/block/$DEV/queue/nomerges); echo 2 > /sys/block/$DEV/queue/nomerges
echo "  caps: ${VMTEST_DRIVE:-as the vmtest-drive line}; max_sectors_kb $(cat /sys/block/$DEV/queue/max_sectors_kb)"
# run RW BS QD SECONDS RAMP: "IOPS MB/s" of one fio run on the device's second GiB.
run() {
  fio --name=p --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=$1 --bs=$2 --iodepth=$3 \
    --offset=1G --size=512M --time_based --runtime=$4 --ramp_time=$5 --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; r=max(j["read"], j["write"], key=lambda d: d["io_bytes"]); print("%.0f %.2f" % (r["iops"], r["bw_bytes"]/1e6))'
}
ALONE=("randread 4k 64" "read 1M 16" "write 1M 16" "read 128k 16" "read 128M 1")
alone=0 got=0
for p in "${ALONE[@]}"; do
  set -- $p; r=$(run $1 $2 $3 12 2)
  echo "  alone: $p: $r (requests/s MB/s)"; [ -n "$r" ] && alone=$((alone + 1))
done
for i in 1 2 3; do
  for pair in "randread 4k 64|read 1M 16" "read 1M 16|randread 4k 64" "randwrite 4k 64|write 1M 16"; do
    a=${pair%|*}; b=${pair#*|}
    set -- $a; run $1 $2 $3 4 0 > /dev/null
    set -- $b; first=$(run $1 $2 $3 1 0)
    set -- $a; run $1 $2 $3 4 0 > /dev/null
    set -- $b; four=$(run $1 $2 $3 4 0)
    echo "  after $a: $b: first second $first, first 4 s $four (requests/s MB/s)"
    [ -n "$first" ] && [ -n "$four" ] && got=$((got + 1))
  done
done
echo $nomerges > /sys/block/$DEV/queue/nomerges
ok "every pattern measured alone (${#ALONE[@]})" "[ $alone -eq ${#ALONE[@]} ]"
ok "every change of pattern measured (9)" "[ $got -eq 9 ]"
