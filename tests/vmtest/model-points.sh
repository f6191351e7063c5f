#!/bin/bash
# make vmtest-model: m-47's run of `tune --model` from iocost off
# (guest/m-47-from-off.sh; M47=m-47-from-default or m-47-from-tight from a
# configured but wrong QoS; M47=m-47-model for the whole of m-47) at device
# points 4x apart in requests/s and in bandwidth, on Debian's 6.1, one
# guest per point; then a table of what each point's POINT line measured:
# the SLO's periods missed from the first (the observed one with iocost
# off included), the time to the first convergence, the fit against the
# best linear model of its windows, and the throughput against the
# tightest fixed QoS; with M47=m-47-model, a second table of the fit from
# 4x either way. Guest logs under $OUT (default
# /var/tmp/iowarden-model-points).
#   POINTS='500:16777216 2000:67108864 8000:268435456'  requests/s:bytes/s
#   a point of four fields, requests/s:bytes/s:write requests/s:write
#   bytes/s, caps each direction instead (QEMU's iops-read, bps-read,
#   iops-write, bps-write: writes dearer than reads, in buckets of their own)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/var/tmp/iowarden-model-points}
SCRIPT=${M47:-m-47-from-off}
POINTS=${POINTS:-500:16777216 2000:67108864 8000:268435456}
CACHE=${VMTEST_CACHE:-/var/cache/iowarden-vmtest}
mkdir -p "$OUT"
rc=0
# A point's fields: requests/s, bytes/s, and writes' own caps if given.
fields() { IFS=: read -r iops bps wiops wbps <<< "$1"; name=${1//:/-}; label=$iops${wiops:+/w$wiops}; }
for p in $POINTS; do
  fields "$p"
  [[ $p =~ ^[0-9]+:[0-9]+(:[0-9]+:[0-9]+)?$ ]] || { echo "model-points: '$p' is not requests/s:bytes/s[:write requests/s:write bytes/s]" >&2; exit 2; }
  drive="throttling.iops-total=$iops,throttling.bps-total=$bps"
  [ -n "$wiops" ] && drive="throttling.iops-read=$iops,throttling.bps-read=$bps,throttling.iops-write=$wiops,throttling.bps-write=$wbps"
  echo "== $drive: $SCRIPT ($(date -u +%FT%TZ))"
  VMTEST_TIMEOUT=${VMTEST_TIMEOUT:-2400} VMTEST_ONLY=$SCRIPT KERNELS=6.1 VMTEST_DRIVE="$drive" tests/vmtest/run.sh > "$OUT/$name.out" 2>&1 || rc=1
  cp "$CACHE/vmtest-6.1.log" "$OUT/$name.guest.log"
  grep -E '^(PASS|FAIL):' "$OUT/$name.guest.log"
done
echo
echo "$SCRIPT:"
printf '%-10s %-10s %-7s %-12s %-11s %-15s %-12s %s\n' IOPS MiB/s SLO missed converged "fit (caps')" "LC p99" "MB/s (tightest)"
for p in $POINTS; do
  fields "$p"
  line=$(grep -h '^POINT ' "$OUT/$name.guest.log" | tail -1)
  if [ -z "$line" ]; then echo "$iops: no POINT line (see $OUT/$name.guest.log)"; rc=1; continue; fi
  declare -A f=(); for kv in ${line#POINT }; do f[${kv%%=*}]=${kv#*=}; done
  fit="${f[fit_measured]} (${f[fit_caps]})"; [ "${f[fit_terms]}" = 0 ] && fit="no term"
  printf '%-10s %-10s %-7s %-12s %-11s %-15s %-12s %s\n' "$label" "$((bps / 1048576))" "${f[slo_ms]}ms" \
    "${f[missed]} of ${f[judged]}" "${f[converged_s]} s" "$fit" \
    "${f[lc_p99_ms]}/${f[fio_p99_ms]}" "${f[tuned_mbps]} (${f[tight_mbps]})"
done
# The whole of m-47 (M47=m-47-model): the fit from a model 4x optimistic
# and 4x pessimistic, against the profiles and the caps' best linear model;
# last, how far that best model of the same windows is from the profiles
# (the distance of a device exactly its caps, seen through a linear model).
grep -qh '^FIT ' "$OUT"/*.guest.log 2>/dev/null || exit $rc
echo
printf '%-10s %-10s %-12s %-7s %-16s %-16s %-18s %s\n' IOPS MiB/s "from 4x" terms "fit (profiles)" "in force" "fit (caps')" "caps' (profiles)"
for p in $POINTS; do
  fields "$p"
  grep -h '^FIT ' "$OUT/$name.guest.log" | while read -r _ kvs; do
    declare -A f=(); for kv in $kvs; do f[${kv%%=*}]=${kv#*=}; done
    printf '%-10s %-10s %-12s %-7s %-16s %-16s %-18s %s\n' "$label" "$((bps / 1048576))" "${f[start]}" \
      "${f[terms]} of 6" "${f[profile]}" "${f[in_force]}" "${f[caps]} (${f[caps_terms]} terms)" "${f[caps_profile]:-?}"
  done
done
exit $rc
