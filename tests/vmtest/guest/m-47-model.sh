# vmtest-checks: 16
# vmtest-drive: throttling.iops-total=2000,throttling.bps-total=67108864
# vmtest-limit: 2400
# `iowarden tune --model` on real iocost: io.cost.model fitted online from
# device occupancy (saturated windows) and written back through the journal.
#   (1) reference: `iowarden profile` (iocost_coef_gen's method) on the region
#       the workload uses, before and after the convergence runs (this
#       guest's speed follows its host's load: the two bracket it);
#       merging is off (nomerges=2) so that requests are the 4 KiB I/Os
#       profile counts;
#   (2) starting from that model 4x too optimistic, then 4x too pessimistic,
#       a best-effort workload cycling through the six patterns the model
#       has (4 KiB random/sequential at QD64 and 1 MiB sequential at QD16,
#       reads and writes), beside a protected reader at a hundredth of
#       the device's requests (LC_TRICKLE), must bring the online fit
#       and the model in force to within 15 % of the profile on every
#       parameter the fit determined; which ones it could not determine is
#       printed from its own reasons;
#   (3) from iocost off: tune --model with a latency-critical cgroup beside a
#       hog must hold a read-p99 SLO (iowarden's histograms and fio's total
#       p99) with more aggregate throughput than the tightest fixed QoS; the
#       wall time to its first convergence is printed, not asserted;
#   (4) each run's fit against the best linear model of the saturated
#       windows it logged (`iowarden capped-model`: least squares with
#       non-negative costs, as io.cost.model's are), every term both
#       determine within 10 %: in (2) the model had the device been exactly
#       its caps, max(requests/iops, bytes/bps) (one pattern at a time, the
#       caps explain the windows); in (3) the windows as measured, since
#       QEMU's in-order queue departs from the caps when windows mix sizes
#       (a large request waiting for bandwidth holds back small ones); both
#       printed everywhere (judge_best); and in (3) the SLO missed in at
#       most 10 % of the periods after the first convergence.
#   kill -9, a vanished device and bad input: t-48-model-safety.sh.
# Other device points: VMTEST_DRIVE='throttling.iops-total=N,throttling.bps-total=B'
# (run.sh) replaces the caps below, or each direction's own caps
# (throttling.iops-read=...,bps-read,iops-write,bps-write); profile's
# duration follows the slower direction's bps.
# The guest's NVMe is capped at 2000 requests/s and 64 MiB/s here (run.sh,
# "vmtest-drive"; the other guest tests have 256 MiB/s). Under TCG the guest
# CPU sustains 5,000 to 14,000 4 KiB requests/s, varying with the host's
# load: without a cap below that, both the profile and the fit measured the
# CPU at 4 KiB, two profiles minutes apart differed by 60 %, and the fit
# from 4x optimistic could not tell the terms apart. With it the profiles
# agree within 5 % and the IOPS terms converge within 4 % from both starts
# (session notes, issue 15). QEMU's two caps act as max(1/iops,
# bytes/bps), not iocost's sum; at 64 MiB/s the 1/iops term is 6 % of a
# 512 KiB request, which bounds how far that bends the fitted bps terms.
# profile runs 14 s per case here: its 128 MiB QD1 blocks take 2 s each on
# this device, and 128 MiB reads for 4 s (two blocks) measured 56 MB/s, for
# 12 s (six) 64 MB/s, where 1 MiB reads at QD16 sustain 67.6 (the first
# block's set-up and each read block's submission, ~130 ms under TCG, are
# idle device time; profile warns below six blocks).
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
IW=$IOWARDEN_BIN
ST=$SCRATCH/model-state; rm -rf $ST
T=$SCRATCH/model; rm -rf $T; mkdir -p $T
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/md-lc $CG/md-hog
echo "default 1000" > $CG/md-lc/io.weight
# Start from a configured but disabled iocost (auto parameters), which is
# what a restore must come back to.
echo "$MM enable=0 ctrl=auto" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.model
pre_qos=$(qos); pre_model=$(model)
nomerges=$(cat /sys/block/$DEV/queue/nomerges); echo 2 > /sys/block/$DEV/queue/nomerges
# The device's caps, as run.sh gave them to QEMU: totals, or each
# direction's own (QEMU takes one or the other, never both), where the read
# caps stand for the totals and writes have theirs (dearer; lib.sh's cap).
CAP_IOPS=$(cap iops-total); CAP_IOPS=${CAP_IOPS:-$(cap iops-read)}
CAP_BPS=$(cap bps-total); CAP_BPS=${CAP_BPS:-$(cap bps-read)}
CAP_WIOPS=$(cap iops-write)
CAP_WBPS=$(cap bps-write)
echo "  device caps: ${CAP_IOPS:-none} requests/s, ${CAP_BPS:-none} bytes/s; writes ${CAP_WIOPS:-the same} requests/s, ${CAP_WBPS:-the same} bytes/s"
# Six 128 MiB blocks per bandwidth case, 15 % to spare (14 s at 64 MiB/s),
# at the slower direction's bandwidth.
PROFILE_S=$(python3 -c "import math; print(max(14, math.ceil(6 * 128 * 1048576 / min(${CAP_BPS:-67108864}, ${CAP_WBPS:-${CAP_BPS:-67108864}}) * 1.15)))")
echo "  before: qos '$pre_qos' model '$pre_model'"

# (1) the reference model, on the region the workload writes.
profile() { # NAME
  "$IW" profile $DEV --duration ${PROFILE_S}s --offset 1G --size 512M > $T/$1.txt 2> $T/$1.log
  local rc=$?
  sed 's/^/  /' $T/$1.log | grep -E 'MB/s|error|warning' | cut -c1-200
  echo "  $1: rc $rc: $(cat $T/$1.txt)"
  return $rc
}
# M47_QUICK=1 (t-47, in make test): the reference is the device's caps
# instead, the model QEMU's throttle is: `profile` of this device measured
# them within 1 % in every run recorded (rbps 41.6 MB/s for a 41.9 cap, the
# IOPS terms 3010-3012 for 3000; 2026-12-02), and its six 23 s cases were
# half of t-47's time. t-46 checks profile's model on every kernel line.
if [ -n "${M47_QUICK:-}${M47_OFF:-}" ]; then
  [ -n "$CAP_IOPS" ] && [ -n "$CAP_BPS" ] || { ok "t-47's drive has both caps (its vmtest-drive line)" false; exit 1; }
  W_IOPS=${CAP_WIOPS:-$CAP_IOPS}; W_BPS=${CAP_WBPS:-$CAP_BPS}
  REF="$MM ctrl=user model=linear rbps=$CAP_BPS rseqiops=$CAP_IOPS rrandiops=$CAP_IOPS wbps=$W_BPS wseqiops=$W_IOPS wrandiops=$W_IOPS"
  REF_NAME="the caps"
  echo "  reference: the caps: $REF"
else
  REF_NAME="the profiles"
  profile profile1; prc=$?
  REF=$(cat $T/profile1.txt)
  ok "profile measures a model of six non-zero parameters" "[ $prc -eq 0 ] && python3 -c '
import sys; kv = dict(t.split(\"=\") for t in sys.argv[1].split()[3:]); sys.exit(not (len(kv) == 6 and all(int(v) > 0 for v in kv.values())))' '$REF'"
fi

# The best-effort workload (lib.sh's cycle): the six patterns below.
# profile's 4 KiB runs (QD64); its large sequential blocks (128 MiB at QD1)
# leave the device idle between blocks, windows half busy that no linear
# model fits (tried: fit error 50-60 %), so 1 MiB at QD16 here (at QD8 the
# mean depth in the device stays just below the saturation depth, 8).
SIX=("randread 4k 64" "read 4k 64" "read 1M 16" "randwrite 4k 64" "write 4k 64" "write 1M 16")
# Bytes read and written on the device so far (/sys/block/DEV/stat sectors).
dev_bytes() { awk '{print ($3 + $7) * 512}' /sys/block/$DEV/stat; }
# The latency-critical reader: 4 KiB random reads at QD1 for $1 s (ramp $2 s), fio JSON in $T/$3.json;
# $4: at most that many reads a second.
lc() {
  bash -c "echo \$\$ > $CG/md-lc/cgroup.procs; exec fio --name=lc --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=1 --offset=0 --size=512M --time_based --runtime=$1 --ramp_time=$2 ${4:+--rate_iops=$4} --lat_percentiles=1 --output-format=json --output=$T/$3.json" > /dev/null 2>&1
}
# "ok|bad n_determined worst_fit_err worst_model_err undetermined-list" of a run's decisions
judge() {
  python3 - "$T/$1.jsonl" "$REF" "$2" "$REF2" "$(dirname "$0")" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[5])
from reference_band import band as reference_band, outside
band = reference_band([sys.argv[2], sys.argv[4]])
ds = [json.loads(l) for l in open(sys.argv[1]) if "model_action" in l]
last = ds[-1]
final = dict(t.split("=") for t in sys.argv[3].split()[3:])
det, und, fe, me = 0, [], 0.0, 0.0
for p in last["fit"]["params"]:
    n = p["name"]
    if p["fitted"] is None:
        und.append(f'{n} ({p["reason"]})')
        continue
    det += 1
    fe = max(fe, abs(outside(band, p["fitted"], n)))
    me = max(me, abs(outside(band, int(final[n]), n)))
    print(f'    {n}: reference {band[n][0]}..{band[n][1]}, fit {p["fitted"]} ({outside(band, p["fitted"], n):+.1%} outside), '
          f'rse {p["relative_error"]:.1%}, {p["samples"]} samples, in force {final[n]} ({outside(band, int(final[n]), n):+.1%} outside)',
          file=sys.stderr)
for p in last["fit"]["params"]:
    if p["fitted"] is None:
        print(f'    {p["name"]}: estimate {p["estimate"]} not determined: {p["reason"]}', file=sys.stderr)
conv = next((d["at_seconds"] for d in ds if d["model_action"] == "converged"), None)
steps = sum(d["model_action"] == "step" for d in ds)
print(f'    windows: {last["fit"]["saturated_windows"]} saturated ({last["fit"]["stalled_windows"]} left out as stalls), {last["fit"]["unsaturated_windows"]} not; '
      f'fit error {last["fit"]["error"]}; {steps} steps; first converged at {conv} s', file=sys.stderr)
print(det, f"{fe:.3f}", f"{me:.3f}", "; ".join(und) or "none")
PY
}
# "N MEASURED CAPS" of a run's last fit against two best linear models of
# the saturated windows it logged (`capped-model`, least squares with
# non-negative costs), over the terms both determine, the largest relative
# difference from each: "measured", of the windows as the device took them,
# stalls included (the fit leaves those out: 22 of 65 windows at 3000/s
# once, which put that yardstick's rrandiops 13 % below the fit, the
# profile and the caps' alike); and "caps", issue 24's yardstick: the same
# windows had the device been exactly its caps, max(requests/iops,
# bytes/bps). The six-pattern runs are judged against the caps (one pattern
# at a time: median measured/caps time 1.00-1.01); the run from iocost off
# against the measured one (its 4 KiB and 128 KiB reads share QEMU's
# in-order queue, which its caps do not model). capped-model's third line:
# how far the measured time is from the caps'. Fourth: how far the caps'
# best linear model itself is from the reference band (REF, REF2), the
# largest over the terms: how close to the profile a device exactly its
# caps comes through a linear model of these windows (the caps act as a
# maximum, the model as a sum; docs/validation/tune-model-fit.md).
judge_best() { # NAME
  local best
  local caps="--iops ${CAP_IOPS:-0} --bps ${CAP_BPS:-0}"
  [ -n "$CAP_WIOPS" ] && caps="--read-iops $CAP_IOPS --read-bps $CAP_BPS --write-iops $CAP_WIOPS --write-bps $CAP_WBPS"
  best=$("$IW" capped-model $caps $T/$1.jsonl 2>&1) || {
    echo "    $1: $best" >&2; echo "0 nan nan nan"; return; }
  python3 - "$T/$1.jsonl" "$best" "$REF" "$REF2" "$(dirname "$0")" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[5])
from reference_band import band as reference_band, outside
lines = {l.split()[0]: l for l in sys.argv[2].splitlines()}
refs = [r for r in sys.argv[3:5] if r]
band = reference_band(refs) if refs else {}
model = {k: dict(t.split("=") for t in lines[k].split()[1:]) for k in ("caps", "measured")}
ds = [json.loads(l) for l in open(sys.argv[1]) if l.endswith("\n") and "model_action" in l]
n, worst_measured, worst_caps, caps_ref = 0, 0.0, 0.0, 0.0
for p in ds[-1]["fit"]["params"] if ds else []:
    b, c = model["measured"].get(p["name"], "-"), model["caps"].get(p["name"], "-")
    if p["fitted"] is None or b == "-" or c == "-":
        continue
    eb, ec = p["fitted"] / int(b) - 1, p["fitted"] / int(c) - 1
    n, worst_measured, worst_caps = n + 1, max(worst_measured, abs(eb)), max(worst_caps, abs(ec))
    cr = outside(band, int(c), p["name"]) if refs else float("nan")
    caps_ref = max(caps_ref, abs(cr))
    print(f'    {p["name"]}: fit {p["fitted"]}, best linear model of the windows: caps\' {c} ({ec:+.1%}; {cr:+.1%} outside the reference), measured {b} ({eb:+.1%})', file=sys.stderr)
print(f'    over {model["measured"]["windows"]} saturated windows; {lines["caps-time"]}', file=sys.stderr)
print(n, f"{worst_measured:.3f}", f"{worst_caps:.3f}", f"{caps_ref:.3f}" if refs else "nan")
PY
}
# The default saturation depth (8). The dumped windows of 4 KiB at QD64
# running flat out hold 7 to 11 requests in the device (fio and the guest
# CPU, not the device, keep the rest) and phase changes 1 to 6; a depth of
# 6 let half-fed 4 KiB windows in and biased the IOPS terms 25-40 % low.
MODEL_OPTS="--saturation-depth 8"
# Each run's length. A step that prices the device cheaper halves vrate with
# it, and the next waits up to 6 periods for the search to climb back: 26 s
# a step here, two steps a term from 4x, and the write terms determined
# last (from 4x pessimistic at 500/s: steps at 17, 43, 69 and 95 s, and the
# write terms' second step not yet taken at 115 s). t-47 (M47_QUICK, from
# 4x optimistic: steps that price the device dearer wait for nothing)
# keeps 120 s.
RUN_S=175; [ -n "${M47_QUICK:-}" ] && RUN_S=120
# The protected reader beside the six patterns: a hundredth of the device's
# requests. Read as fast as QD1 goes, its 4 KiB reads were in every window:
# 31-32 a second in the 1 MiB windows at 500/s, where QEMU's bytes bucket
# binds and its requests bucket, which the reads take, idles. The caps act
# as a maximum, so those reads cost the device nothing, where a linear
# model charges each 1/iops: 6.4 % of those windows' time, taken from wbps
# (the fit, and the caps' best linear model alike, 16-27 % above the
# profile). With each direction capped apart the reads run beside the
# writes in buckets of their own: 1,850 a second in the 4 KiB write
# windows at 2000/s reads and 700/s writes, and no write term was
# determined ("the windows contradict a linear model"). A period judges
# the SLO from a third of its reads (--min-samples; 100 by default): with
# fewer the QoS search holds, and each step that prices the device cheaper
# halved vrate again (800, 400, 200, 100 %, where iocost throttled the hog
# below saturation and two terms kept too few samples).
LC_TRICKLE=${CAP_IOPS:+$(( (CAP_IOPS + 99) / 100 ))}
# converge NAME FACTOR: start from the profile's model scaled by FACTOR
converge() {
  local name=$1 f=$2 start
  start=$(python3 -c '
import sys
t = sys.argv[1].split(); f = float(sys.argv[2])
print(" ".join(t[:3] + [k + "=" + str(max(1, round(int(v) * f))) for k, v in (x.split("=") for x in t[3:])]))' "$REF" $f)
  echo "$start" > $CG/io.cost.model
  echo "  $name: start model '$(model)'"
  cycle $RUN_S & local hog=$!
  lc $RUN_S 0 $name-lc $LC_TRICKLE & local l=$!
  sleep 2
  "$IW" tune --device $DEV --protect /md-lc --slo read-p99=2000ms --vrate-max 800 --start 800 --period 3s \
    ${LC_TRICKLE:+--min-samples $LC_TRICKLE} --model $MODEL_OPTS --listen 127.0.0.1:9631 --state-dir $ST --duration $((RUN_S - 5))s > $T/$name.jsonl 2> $T/$name.log
  local trc=$?; echo $trc > $T/$name.rc
  stop_hog $hog; wait $l 2>/dev/null
  local final=$(grep -o "model rbps=[^;]* in force" $T/$name.log | tail -1 | sed 's/^model //; s/ in force$//')
  grep -E 'model (step|converged|rollback)' $T/$name.log | sed 's/^/  /' | cut -c1-200 | head -8
  # The windows the fit saw: seconds, mean depth, saturated, then requests
  # (pages for bps) per parameter.
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if "model_window" in l:
        w = json.loads(l)["model_window"]; x = w["requests_or_pages"]
        print("    window %.2fs depth %6.1f %s %s" % (w["seconds"], w["mean_inflight"], "sat" if w["saturated"] else "---",
              " ".join("%s=%d" % (k, x[k]) for k in ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"))))' $T/$name.jsonl
  echo "$MM ctrl=user model=linear $final" > $T/$name.final
  echo "  $name: rc $trc; model in force at the end: $final"
  # The start model was set by this script, not by the tuner: put it back.
  echo "$MM ctrl=auto" > $CG/io.cost.model
}
echo "$MM enable=0" > $CG/io.cost.qos
REF2=""
# M47_QUICK=1 (t-47-model-fit.sh, in `make test`): (1) and (2) from 4x
# optimistic only, against one profile; (4) printed, not asserted.
RUNS="optimistic pessimistic"; [ -n "${M47_QUICK:-}" ] && RUNS=optimistic
# M47_OFF=1 (m-47-from-off.sh): only (3), against the caps.
[ -n "${M47_OFF:-}" ] && RUNS=""
[ -n "$RUNS" ] && converge optimistic 4
if [ -z "${M47_QUICK:-}${M47_OFF:-}" ]; then
  converge pessimistic 0.25
  echo "$MM enable=0" > $CG/io.cost.qos
  profile profile2
  REF2=$(cat $T/profile2.txt)
fi
# Judged against both profiles (the band they span).
for name in $RUNS; do
  read n fe me und < <(judge $name "$(cat $T/$name.final)")
  echo "  $name: $n parameters determined; worst fit error $fe, worst in-force error $me (outside the band of $REF_NAME); undetermined: $und"
  ok "model from 4x $name: the fit determines all six parameters, each within 15% of $REF_NAME (worst $fe)" "[ '$n' = 6 ] && python3 -c 'import sys; sys.exit(not $fe <= 0.15)'"
  ok "model from 4x $name: the model in force is within 15% of $REF_NAME on them (worst $me)" "[ '$n' -gt 0 ] && python3 -c 'import sys; sys.exit(not $me <= 0.15)'"
  read bn bm bc br < <(judge_best $name)
  best="the fit within 10% of the caps' best linear model of its windows on $bn terms (worst $bc; measured $bm)"
  if [ -n "${M47_QUICK:-}" ]; then
    echo "  model from 4x $name: not asserted in make test (t-47): $best"
  else
    ok "model from 4x $name: $best" "[ '$bn' -gt 0 ] && python3 -c 'import sys; sys.exit(not $bc <= 0.10)'"
  fi
  echo "FIT start=$name iops=${CAP_IOPS:-?} bps=${CAP_BPS:-?} terms=$n profile=$fe in_force=$me caps_terms=$bn caps=$bc caps_profile=$br"
done
rcs=$(for name in $RUNS; do cat $T/$name.rc; done | tr -d '\n')
logs=$(for name in $RUNS; do echo $T/$name.log; done)
[ -n "$RUNS" ] && ok "model runs exit on their own (rc $rcs) and restore qos and model" "[ -n '$rcs' ] && [ -z '${rcs//0/}' ] && [ \"\$(qos)\" = \"\$pre_qos\" ] && [ \$(grep -l 'restored .*io.cost.model' $(echo $logs) | wc -l) -eq $(echo $RUNS | wc -w) ]"
cleanup() {
  echo "$MM enable=0" > $CG/io.cost.qos; echo "$MM ctrl=auto" > $CG/io.cost.model
  echo $nomerges > /sys/block/$DEV/queue/nomerges
  rmdir $CG/md-lc $CG/md-hog 2>/dev/null
  echo "  after: qos '$(qos)' model '$(model)'"
}
[ -n "${M47_QUICK:-}" ] && { cleanup; exit 0; }

# (3) from iocost off. The hog alternates 4 KiB and 128 KiB random reads
# (4 s each). The SLO is derived as in t-45: 2 x the p99 under the tightest
# fixed QoS (vrate 20 %), with its aggregate throughput to beat. That QoS
# runs on the profiled model: on the kernel's default SSD model (488 MB/s,
# 8518 random reads/s) vrate 20 % is still above this capped device and
# holds nothing back.
# The reader asks for a tenth of the device's requests (a service with a
# request rate; issue 56): read as fast as QD1 goes, it alone filled a
# 500/s device and half a 2000/s one, the tightest QoS held it in iocost's
# throttle, which fio's clat leaves out (it is submission time), and the
# SLO derived from that clat was below what any vrate gives once the hold
# counts (the tuner judges from submission): held below ~4 % of the
# default model, queued above. So the SLO and the steady state's check
# read fio's total latency (submission and completion, lat_percentiles):
# what the application waits for. At 500/s a tenth of the device is still
# most of the reader's share at the tightest QoS; its clat p99 there was
# 1.3-2.0 ms, and the tuned run's clat 3.3-3.5 ms with iowarden's p99 from
# submission 10-14 ms (2026-12-05).
# The tightest QoS is measured as the tuned run is observed: with the
# tuner beside it (--dry-run, its flags otherwise; it writes nothing), so
# that the SLO and the run it judges share the guest's two TCG vCPUs
# alike. At 500/s and a fixed vrate of 40 %, the reader's p99 per 3.5 s
# window had a median of 1.66 ms alone and 2.46 ms with the tuner beside
# it in one run, 2.65 and 2.73 ms in a rerun
# (tests/vmtest/guest/m-56-tight-periods.sh, 2026-12-06); an SLO of twice
# the p99 measured alone (4 ms) was missed at the tightest QoS's vrate in
# 2 of 12 of the tuner's periods.
LC_RATE=${CAP_IOPS:+$((CAP_IOPS / 10))}
HOG=("randread 4k 32" "randread 128k 32")
echo "$REF" > $CG/io.cost.model
"$IW" tune --device $DEV --protect /md-lc --slo read-p99=1s --vrate-min 1 --vrate-max 800 --period 3s \
  --model $MODEL_OPTS --dry-run --listen 127.0.0.1:9633 --state-dir $ST-observer > $T/observer.jsonl 2> $T/observer.log & obs=$!
cycle 40 "${HOG[@]}" & hog=$!; sleep 1; pin_vrate $MM 20; sleep 1; b0=$(dev_bytes); lc 24 0 tight $LC_RATE; b1=$(dev_bytes); stop_hog $hog
kill -TERM $obs; wait $obs; obs_rc=$?
tight_tot=$(python3 -c "print(f'{($b1 - $b0) / 24e6:.1f}')")
tight=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print(r["lat_ns"]["percentile"]["99.000000"]/1e6)' $T/tight.json)
echo "$MM enable=0 ctrl=auto" > $CG/io.cost.qos; echo "$MM ctrl=auto" > $CG/io.cost.model
SLO_MS=$(python3 -c "import math; print(max(1, math.ceil(2 * $tight)))")
echo "  tightest fixed QoS (${REF_NAME}' model, vrate 20 %), the tuner observing (--dry-run, rc $obs_rc, $(grep -c '"action"' $T/observer.jsonl) periods): LC (${LC_RATE:-QD1} reads/s) p99 $tight ms, $tight_tot MB/s -> SLO read-p99=${SLO_MS}ms"
ok "the tightest fixed QoS measured with the tuner observing, writing nothing (rc $obs_rc, $(grep -c '"action"' $T/observer.jsonl) periods judged or not)" "[ $obs_rc -eq 0 ] && [ \$(grep -c '\"action\"' $T/observer.jsonl) -ge 5 ] && ! grep -q '\"written\": *\"' $T/observer.jsonl"
# M47_FROM (m-47-from-default.sh, m-47-from-tight.sh): the tuner starts
# from a configured but wrong QoS instead of iocost off (issue 56): default,
# iocost on with the kernel's own QoS and model (too loose: t-45's (b)
# missed its SLO by 3x); tight, the tightest fixed QoS above (vrate 20 % on
# the reference model: met, and the throughput to beat). A restore returns
# to it.
FROM=${M47_FROM:-off}
case $FROM in
  off) from="from iocost off" ;;
  default) from="from the kernel's default QoS"; echo "$MM enable=1 ctrl=auto" > $CG/io.cost.qos ;;
  tight) from="from the tightest fixed QoS"; echo "$REF" > $CG/io.cost.model; pin_vrate $MM 20 ;;
  *) ok "M47_FROM=$FROM is off, default or tight" false; exit 1 ;;
esac
start_qos=$(qos); start_model=$(model)
echo "  $from: qos '$start_qos' model '$start_model'"
t0=$(date +%s)
cycle 150 "${HOG[@]}" & hog=$!
lc 80 60 tuned $LC_RATE & l=$!
# No --start: the first period measures the device with iocost as found
# (off, or the QoS above) and the first pin follows it. --vrate-min 1: on the kernel's default SSD model
# (8518 random reads/s) a 500 requests/s device holds the SLO near 3 %.
"$IW" tune --device $DEV --protect /md-lc --slo read-p99=${SLO_MS}ms --vrate-min 1 --vrate-max 800 --period 3s \
  --model $MODEL_OPTS --listen 127.0.0.1:9632 --state-dir $ST > $T/off.jsonl 2> $T/off.log & tp=$!
snap() { python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9632/snapshot.json").read().decode())' > $T/$1.json; }
sleep 62; snap s0; b0=$(dev_bytes); w0=$(date +%s.%N)
curl -s http://127.0.0.1:9632/metrics | grep -E '^iowarden_tune_model_(param_determined|windows|decisions)' | sed 's/^/  /' | head -20
wait $l; snap s1; b1=$(dev_bytes); w1=$(date +%s.%N)
kill -TERM $tp; wait $tp; orc=$?
stop_hog $hog
tuned_tot=$(python3 -c "print(f'{($b1 - $b0) / ($w1 - $w0) / 1e6:.1f}')")
python3 - $T/off.jsonl $T/s0.json $T/s1.json $T/tuned.json "$(dirname "$0")" > $T/off.sum <<'PY'
import json, sys
sys.path.insert(0, sys.argv[5])
from tuner_windows import p99_ms, record
ds = [json.loads(l) for l in open(sys.argv[1])]
q = [d for d in ds if "action" in d]
conv = next((d["at_seconds"] for d in q if d["action"] == "converged"), None)
s0, s1 = (json.load(open(p)) for p in sys.argv[2:4])
r0, r1 = (record(s, "/md-lc", "nvme0n1") for s in (s0, s1))
d = [b - a for a, b in zip(r0["counts"], r1["counts"])]
total, p99 = sum(d), p99_ms(d, r1["bounds"])
def mbps(s):
    return sum(x["bytes"] for x in s["io"] if x["device"]["name"] == "nvme0n1")
tot = (mbps(s1) - mbps(s0)) / (s1["taken_at_unix_seconds"] - s0["taken_at_unix_seconds"]) / 1e6
fio = json.load(open(sys.argv[4]))["jobs"][0]["read"]["lat_ns"]["percentile"]["99.000000"] / 1e6
print(f"{conv} {p99:.3f} {total} {fio:.3f} {tot:.1f}")
PY
read conv iw_p99 iw_n fio_p99 tot < $T/off.sum
echo "  tune --model $from: first QoS convergence at ${conv} s; steady state: LC p99 iowarden ${iw_p99} ms over $iw_n reads, fio (submission to completion) ${fio_p99} ms; device ${tot} MB/s"
# iocost's own account of each cgroup over the steady state (activations,
# donations and debt: why a reader iocost weighs at 1000 is held).
python3 - $T/s0.json $T/s1.json <<'PY'
import json, sys
s0, s1 = (json.load(open(p)) for p in sys.argv[1:3])
def cgs(s):
    return {c["cgroup"]["path"]: c for c in s.get("iocost_cgroups", []) if c["device"]["name"] == "nvme0n1"}
a, b = cgs(s0), cgs(s1)
secs = s1["taken_at_unix_seconds"] - s0["taken_at_unix_seconds"]
for path in ("/md-lc", "/md-hog"):
    if path not in b:
        print(f"  off: iocost {path}: no record"); continue
    x, y = a.get(path, {}), b[path]
    d = {k: (y[k] - x.get(k, 0)) / secs for k in ("activations", "idles", "shortages", "transfers", "adjusts", "forgives")}
    print(f"  off: iocost {path} over {secs:.0f} s, per second: " + " ".join(f"{k} {v:.1f}" for k, v in d.items())
          + f"; at the end weight {y['weight']:.0f} inuse {y['inuse']:.0f} hweight_inuse {y['hweight_inuse_ratio']:.3f} debt {y['debt_seconds'] * 1e3:.1f} ms delay {y['delay_seconds'] * 1e3:.1f} ms")
PY
python3 -c '
import json, sys
ds = [json.loads(l) for l in open(sys.argv[1]) if "model_action" in l]
def fit_line(what, f):
    print("  off: %s over %d saturated windows (%d stalls), %d not: %s" % (what, f["saturated_windows"], f["stalled_windows"], f["unsaturated_windows"],
          "; ".join("%s=%s (est %d, rse %s%s)" % (p["name"], p["fitted"], p["estimate"], p["relative_error"] and round(p["relative_error"], 3), p["reason"] and ": " + p["reason"]) for p in f["params"])))
# The windows the start saw (those logged before its decision).
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "model_action" in d:
        break
    w = d.get("model_window")
    if w:
        print("  off: window %.2fs busy %ss depth %.1f %s requests/pages %s" % (w["seconds"], w.get("busy_seconds"), w["mean_inflight"], "saturated" if w["saturated"] else "not",
              " ".join("%s=%d" % kv for kv in w["requests_or_pages"].items() if kv[1])))
for d in ds[:1]:
    if d["model_action"] == "scale":
        fit_line("start fit", d["fit"])
if ds:
    fit_line("model fit", ds[-1]["fit"])
    print("  off: model decisions:", " ".join(d["model_action"] for d in ds))' $T/off.jsonl
# Every QoS period: what the SLO (with iocost's throttle wait) and the
# model did; "search" marks the periods before the first convergence.
python3 - $T/off.jsonl <<'PY'
import json, sys
ds = [json.loads(l) for l in open(sys.argv[1]) if l.endswith("\n")]
model = None
seen = False
for d in ds:
    if "model_action" in d:
        model = d["model_action"]
        continue
    if "action" not in d:
        continue  # a model window
    seen = seen or d["action"] == "converged"
    s = max(d["slos"], key=lambda s: ((s["observed_seconds"] or 0) + s["throttle_seconds"]) / s["target_seconds"])
    r = ((s["observed_seconds"] or 0) + s["throttle_seconds"]) / s["target_seconds"]
    own = "-" if s.get("own_need") is None else "%.1f%%" % s["own_need"]
    print("  period %6.1fs %-6s %-10s vrate %7.2f -> %7.2f  SLO %4.0f%% (throttled %.1f ms, %d I/Os, own need %s)%s  device %5.1f MB/s %5.0f IOPS cost %5.1f%%%s  model %-12s %s" % (
          d["at_seconds"], "" if seen else "search", d["action"], d["vrate_from"], d["vrate_to"],
          r * 100, s["throttle_seconds"] * 1e3, s["samples"], own, " MISS" if r > 1 else "     ",
          d["throughput_bytes_per_second"] / 1e6, d["iops"], 100 * d.get("cost_rate", 0),
          " sat" if d.get("device_saturated") else "    ", model,
          d["reason"].split(": /")[0][:150]))
PY
grep -E 'model (scale|step|rollback|converged)|summary|converged after' $T/off.log | sed 's/^/  /' | cut -c1-220 | tail -6
echo "  wall time from start (iocost off) to the steady-state window: $(( $(date +%s) - t0 )) s in all"
read bn bm bc br < <(judge_best off)
# Holding the SLO from the first pin keeps the device below saturation, and
# the fit may then have no windows to determine a term from (issue 56: at
# 2000/s and 8000/s, 3-4 saturated windows, all from the observed period):
# its last decision must say why for every term.
ok "tune --model $from: the fit within 10% of the measured best linear model of its windows on $bn terms (worst $bm; caps' $bc), or says why it determined none" "if [ '$bn' -gt 0 ]; then python3 -c 'import sys; sys.exit(not $bm <= 0.10)'; else python3 -c \"import json, sys; ds = [json.loads(l) for l in open('$T/off.jsonl') if 'model_action' in l]; sys.exit(not (ds and all(p['fitted'] is not None or p['reason'] for p in ds[-1]['fit']['params'])))\"; fi"
read missed after_n worst_ms < <(sed -n 's/.*missed in \([0-9]*\) of \([0-9]*\) after first converging (worst \([0-9.]*\)ms).*/\1 \2 \3/p' $T/off.log | tail -1)
ok "tune --model $from: the SLO missed in at most 10% of the periods after the first convergence (${missed:-?} of ${after_n:-?}, worst ${worst_ms:-?} ms)" "[ '${after_n:-0}' -gt 0 ] && [ \$(( ${missed:-0} * 10 )) -le ${after_n:-0} ]"
ok "tune --model $from converges (QoS; at ${conv} s) and holds read-p99=${SLO_MS}ms: iowarden ${iw_p99} ms, fio ${fio_p99} ms" "[ '$conv' != None ] && [ $iw_n -ge 300 ] && python3 -c 'import sys; sys.exit(not ($iw_p99 <= $SLO_MS and $fio_p99 <= $SLO_MS))'"
ok "tune --model: more aggregate throughput than the tightest fixed QoS (${tuned_tot} vs ${tight_tot} MB/s, /sys/block stat)" "python3 -c 'import sys; sys.exit(not $tuned_tot > $tight_tot)'"
ok "tune --model: exits 0 on SIGTERM and restores qos and model as it found them" "[ $orc -eq 0 ] && [ \"\$(qos)\" = \"\$start_qos\" ] && [ \"\$(model)\" = \"\$start_model\" ]"
# Issue 56: from the first period, the observed one with iocost off
# included, not only after converging.
read met judged < <(sed -n 's/.*read-p99=[0-9]*ms: met in \([0-9]*\) of \([0-9]*\) periods.*/\1 \2/p' $T/off.log | tail -1)
missed_all=$(( ${judged:-0} - ${met:-0} ))
ok "tune --model $from: the SLO missed in at most 10% of all periods from the first ($missed_all of ${judged:-?})" "[ '${judged:-0}' -gt 0 ] && [ \$(( $missed_all * 10 )) -le ${judged:-0} ]"
ok "tune --model $from: converged within 60 s (at ${conv} s)" "[ '$conv' != None ] && python3 -c 'import sys; sys.exit(not $conv <= 60)'"
echo "POINT from=$FROM iops=${CAP_IOPS:-?} bps=${CAP_BPS:-?} slo_ms=$SLO_MS missed=$missed_all judged=${judged:-?} converged_s=$conv fit_measured=$bm fit_caps=$bc fit_terms=$bn lc_p99_ms=$iw_p99 fio_p99_ms=$fio_p99 tuned_mbps=$tuned_tot tight_mbps=$tight_tot"
