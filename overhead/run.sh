#!/bin/bash
# Tracing overhead on one loop device, in one invocation, interleaved over
# REPS rounds: fio with no tracing, with iowarden (defaults: the culprit
# account on), with iowarden --shards 1 (the atomic adds of hosts with more
# CPUs than shards), with iowarden --no-culprits (the account off: the
# difference is what the account costs), with the peer everyone has, bcc's
# libbpf-tools biolatency (Debian package libbpf-tools), with a bpftrace
# biolatency-style script where bpftrace starts, and with the floor
# (overhead/floor.bpf.c: a program that returns at once on each block_rq_*
# tracepoint). Two loads per tool:
#   - one fio job, 4 KiB random reads at IODEPTH (the figures
#     overhead/RESULTS.md quotes);
#   - readers pinned one per CPU, each 4 KiB random reads at QD1, on 1, 2,
#     4, ... and CPUS CPUs, all in the bench's cgroup (every mode but the
#     floor and bpftrace).
# BPF stats are on only while fio runs: kernel-measured ns per fio I/O (a
# tool's programs: those loaded while it started; every device the I/O
# crosses), ns per run and runs per fio I/O of each program, the ratios to
# biolatency and to untraced IOPS, each tool's time above the floor, and
# its process's CPU time per fio I/O (all threads: iowarden's user-space
# side, the culprit account's replay included). Each round ends side by
# side: iowarden and biolatency attached at once on the QD load and the
# readers on all CPUs, in both orders of attachment (side_by_side_round).
# Then `iowarden bench-shards` (the counter updates and the culprit
# account's record on 1..N CPUs at once). The arithmetic is
# overhead/report.py's; the last line, `bench-summary {json}`, holds the
# figures; overhead/summarize.py gives their median and range over
# invocations.
# Env: REPS (5), RUNTIME (s per fio run, 6), IODEPTH (16), CPUS (the most
# readers, one per CPU: all CPUs the bench may run on), SCHED (the loop
# device's I/O scheduler: none (default) or mq-deadline; a loop device
# starts with mq-deadline), BACKING_DIR (where the loop device's 1 GiB
# file lies: /var/tmp; a tmpfs takes the backing disk out of the figures,
# where the kernel has O_DIRECT on tmpfs, 6.6+), PORT (iowarden's, 19699).
#
# MODE=locks: what the lock-contention programs cost. Against iowarden
# without them (the default) in the same invocation: IOPS at the QD load
# with --locks (block-layer stacks only) and with --locks-all; and the
# kernel-measured ns per contention event (contention_begin + contention_end
# run time over their runs) under a contended load (LOCK_JOBS jobs on the
# same loop device with mq-deadline selected for it).
#
# MODE=side-by-side: only the rounds with iowarden and biolatency attached
# at once (every default invocation runs them too; see side_by_side_round);
# SBS_FLAGS: iowarden's flags there (none: the defaults), e.g.
# --no-culprits to see whether the replay thread slows biolatency.
#
# MODE=cost: what charging the linear cost model costs. iowarden with
# --no-cost against iowarden (cost on, the default), interleaved: IOPS and
# kernel-measured ns per I/O of its programs.
set -euo pipefail
cd "$(dirname "$0")/.."
IOWARDEN=${IOWARDEN:-target/release/iowarden}
REPS=${REPS:-5}; RUNTIME=${RUNTIME:-6}; IODEPTH=${IODEPTH:-16}; SCHED=${SCHED:-none}
PORT=${PORT:-19699}; BACKING_DIR=${BACKING_DIR:-/var/tmp}; SBS_FLAGS=${SBS_FLAGS:-}
[[ $(id -u) -eq 0 ]] || { echo "run as root" >&2; exit 1; }
[[ $SCHED == none || $SCHED == mq-deadline ]] || { echo "SCHED=$SCHED: use none or mq-deadline" >&2; exit 2; }
# The CPUs this shell may run on, in order; readers take the first CPUS.
mapfile -t ALLOWED < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
CPUS=${CPUS:-${#ALLOWED[@]}}
if ! [[ $CPUS =~ ^[1-9][0-9]*$ ]] || ((CPUS > ${#ALLOWED[@]})); then
  echo "CPUS=$CPUS: a number of readers from 1 to the ${#ALLOWED[@]} CPUs the bench may run on" >&2; exit 2
fi
COUNTS=(); for ((k = 1; k < CPUS; k *= 2)); do COUNTS+=("$k"); done; COUNTS+=("$CPUS")
READER_CPUS=$(IFS=,; echo "${ALLOWED[*]:0:CPUS}")
CPU_MODEL=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
KERNEL=$(uname -r)
# report.py reads them from its environment.
export RUNTIME IODEPTH SCHED READER_CPUS CPU_MODEL KERNEL SBS_FLAGS
W=$(mktemp -d "$BACKING_DIR/iowarden-bench.XXXXXX")
BACKING_FS=$(df --output=fstype "$W" | tail -1); export BACKING_FS
LOOP=""; BG=""; BG_FIRST=""; MOUNTED_TRACEFS=""; TOOL_IDS=""; IW_IDS=""; BIO_IDS=""
cleanup() {
  set +e  # every step, whatever the one before did
  for p in $BG $BG_FIRST; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  sysctl -qw kernel.bpf_stats_enabled=0
  # Leave the machine as found: a tracefs left mounted hides, from later
  # runs, what a fresh machine lacks.
  if [[ -n $MOUNTED_TRACEFS ]]; then umount /sys/kernel/tracing; fi
  if [[ -n $LOOP ]]; then losetup -d "$LOOP"; fi
  rm -rf "$W"
}
trap cleanup EXIT
trap "exit 130" INT TERM
truncate -s 1G "$W/disk.img"
LOOP=$(losetup -f --show --direct-io=on "$W/disk.img")
SCHED_FILE=/sys/block/$(basename "$LOOP")/queue/scheduler
echo "$SCHED" >"$SCHED_FILE"
# Pre-fill so reads hit allocated blocks.
dd if=/dev/zero of="$LOOP" bs=1M count=1024 oflag=direct status=none
echo "# $(date -u '+%F %H:%M') UTC, $CPU_MODEL, ${#ALLOWED[@]} CPUs, Linux $KERNEL; loop device over a file on $BACKING_FS," \
  "scheduler $(sed "s/.*\[\(.*\)\].*/\1/" "$SCHED_FILE"); readers on 1..$CPUS CPUs (${COUNTS[*]}); REPS=$REPS RUNTIME=$RUNTIME IODEPTH=$IODEPTH"
# The CPU's mitigations of indirect calls and returns: what a BPF helper
# call and a function return cost follows them, the two tools make
# different numbers of them a request, and the ratio between them moved
# from host to host (overhead/RESULTS.md, "Intel Xeon, 2026-12-05 evening").
mitigation() { sed 's/;.*//' "/sys/devices/system/cpu/vulnerabilities/$1" 2>/dev/null || echo "?"; }
echo "# mitigations: spectre_v2 $(mitigation spectre_v2); retbleed $(mitigation retbleed); spec_rstack_overflow $(mitigation spec_rstack_overflow)"

# The loads. `qd`: one job at IODEPTH; `readers K`: K jobs at QD1, each
# pinned to one of the first K CPUs (cpus_allowed_policy=split).
fio_run() {
  local load=(--iodepth="$IODEPTH" --ioengine=libaio)
  if [[ $1 == readers ]]; then
    load=(--ioengine=psync --numjobs="$2" --cpus_allowed="$(IFS=,; echo "${ALLOWED[*]:0:$2}")"
      --cpus_allowed_policy=split --group_reporting)
  fi
  fio --name=bench --filename="$LOOP" --direct=1 --rw=randread --bs=4k "${load[@]}" \
    --time_based --runtime="$RUNTIME" --size=1G --output-format=json --output="$W/fio.json" >/dev/null
}

prog_ids() { bpftool prog show -j | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))'; }
# A tool's programs are those loaded while it started: other programs on
# the host (bpftool here cannot name a program's process) are left out.
# Started in this shell, not a subshell, so that cleanup finds BG.
tool_started() {  # BEFORE-IDS
  TOOL_IDS=$(comm -13 <(tr ' ' '\n' <<<"$1" | sort) <(prog_ids | tr ' ' '\n' | sort) | tr '\n' ' ')
}
tool_has() {  # NAME: whether the tool's programs include one named NAME
  bpftool prog show -j | python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1].split()}
sys.exit(not any(p["id"] in ids and p.get("name") == sys.argv[2] for p in json.load(sys.stdin)))' "$TOOL_IDS" "$1"
}
start_iowarden() {  # iowarden run's extra options
  local before; before=$(prog_ids)
  if curl -sf "http://127.0.0.1:$PORT/snapshot.json" >/dev/null; then
    echo "something already answers on port $PORT: set PORT" >&2; exit 1
  fi
  "$IOWARDEN" run --listen "127.0.0.1:$PORT" --interval 1s "$@" >"$W/iowarden.log" 2>&1 & BG=$!
  for _ in $(seq 100); do
    kill -0 "$BG" 2>/dev/null || break
    curl -sf "http://127.0.0.1:$PORT/snapshot.json" >/dev/null && { tool_started "$before"; return; }
    sleep 0.1
  done
  echo "iowarden $* did not start: $(cat "$W/iowarden.log")" >&2; exit 1
}
start_biolatency() {
  local before; before=$(prog_ids)
  /usr/sbin/biolatency 3600 >"$W/biolatency.log" 2>&1 & BG=$!
  # It attaches within a second; wait until its programs are loaded.
  for _ in $(seq 100); do
    tool_started "$before"
    tool_has block_rq_complete_btf && { sleep 0.5; tool_started "$before"; return; }
    sleep 0.1
  done
  echo "biolatency did not start: $(cat "$W/biolatency.log")" >&2; exit 1
}
start_floor() {
  local before; before=$(prog_ids)
  overhead/floor.py "$W/floor.bpf.o" >"$W/floor.log" 2>&1 & BG=$!
  for _ in $(seq 100); do grep -q attached "$W/floor.log" && { tool_started "$before"; return; }; sleep 0.1; done
  echo "the floor's programs did not attach: $(cat "$W/floor.log")" >&2; exit 1
}
# Debian 12's bpftrace has no raw tracepoints and this kernel no kprobes: the
# request is identified by (dev, sector) on the classic tracepoints instead.
BT='tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; }
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ {
  @usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000); delete(@start[args->dev, args->sector]); }'
start_bpftrace() {
  local before; before=$(prog_ids)
  ulimit -l unlimited 2>/dev/null || true
  bpftrace -e "$BT" >"$W/bt.log" 2>&1 & BG=$!
  for _ in $(seq 300); do grep -q Attaching "$W/bt.log" && { sleep 1; tool_started "$before"; return; }; sleep 0.1; done
  echo "bpftrace did not attach: $(cat "$W/bt.log")" >&2; exit 1
}
stop_bg() {  # bpftrace has been seen to hang on SIGTERM: SIGKILL after 5 s
  [[ -n $BG ]] || return 0
  kill "$BG" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$BG" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$BG" 2>/dev/null || true
  wait "$BG" 2>/dev/null || true; BG=""; TOOL_IDS=""
}

# The running tool's CPU time so far, ns, all its threads (user and
# kernel, BPF run from its syscalls included): what its user-space side
# costs, beside the programs' time.
tool_cpu_ns() {
  if [[ -z $BG ]]; then echo 0; return; fi
  cat /proc/"$BG"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}

# One fio run (fio_run's arguments) with the kernel's BPF run-time
# statistics on: the programs before and after in $W/p0.json and
# $W/p1.json, the running tool's CPU time meanwhile in TOOL_CPU_NS.
timed_fio() {
  local c0
  sysctl -qw kernel.bpf_stats_enabled=1
  bpftool prog show -j >"$W/p0.json"
  c0=$(tool_cpu_ns)
  fio_run "$@"
  TOOL_CPU_NS=$(( $(tool_cpu_ns) - c0 ))
  bpftool prog show -j >"$W/p1.json"
  sysctl -qw kernel.bpf_stats_enabled=0
}

# One fio run under the running tool (none: untraced), recorded in
# $W/runs.jsonl; prints "iops ns_per_io detail" (report.py record).
measure() {  # MODE ROUND qd | MODE ROUND readers K
  local mode=$1 rnd=$2; shift 2
  if [[ $mode == none ]]; then
    fio_run "$@"
    overhead/report.py record "$W/runs.jsonl" - - "$W/fio.json" "" 0 "$1" none "${2:-1}" "$rnd"
    return
  fi
  timed_fio "$@"
  overhead/report.py record "$W/runs.jsonl" "$W/p0.json" "$W/p1.json" "$W/fio.json" "$TOOL_IDS" "$TOOL_CPU_NS" \
    "$1" "$mode" "${2:-1}" "$rnd"
}

if [[ ${MODE:-} == cost ]]; then
  for r in $(seq "$REPS"); do
    start_iowarden --no-cost; read -r i0 n0 d0 < <(measure no-cost "$r" qd); stop_bg
    start_iowarden; read -r i1 n1 d1 < <(measure iowarden "$r" qd); stop_bg
    printf 'round %s: --no-cost %.0f IOPS, %.0f ns/I/O (%s) | cost %.0f IOPS, %.0f ns/I/O (%s)\n' \
      "$r" "$i0" "$n0" "$d0" "$i1" "$n1" "$d1"
  done
  python3 - "$W/runs.jsonl" <<'PY'
import json, statistics as st, sys, os
recs = [json.loads(l) for l in open(sys.argv[1])]
v = lambda mode, k: st.median(r[k] for r in recs if r["mode"] == mode)
offi, offn, oni, onn = v("no-cost", "iops"), v("no-cost", "ns_per_io"), v("iowarden", "iops"), v("iowarden", "ns_per_io")
print(f"\ncost model, loop device (scheduler {os.environ['SCHED']}) 4 KiB randread QD{os.environ['IODEPTH']}, "
      f"medians of {len(recs) // 2} interleaved rounds")
print(f"  iowarden --no-cost {offi:10.0f} IOPS   {offn:6.0f} ns BPF per I/O")
print(f"  iowarden (cost)    {oni:10.0f} IOPS   {onn:6.0f} ns BPF per I/O   (+{onn-offn:.0f} ns, IOPS ratio {oni/offi:.3f})")
PY
  exit 0
fi

# Side by side: iowarden (defaults) and biolatency attached at once, so
# both measure the same requests in the same seconds; alone in turn, each
# meets other seconds of host noise, and biolatency's own time per I/O
# swings by a fifth between runs here. Each round runs each load twice,
# once with iowarden attached first and once with biolatency first: the
# program that runs first on a completion meets the request's bio,
# cgroup and queue colder (tens of ns a request here), and alternating
# the order cancels that. Recorded as bench "sbs-qd" / "sbs-readers"
# (readers on all CPUs), mode iowarden or biolatency, `first` the tool
# attached first.
measure_pair() {  # FIRST ROUND qd | FIRST ROUND readers K
  local first=$1 rnd=$2 bench=sbs-$3; shift 2
  timed_fio "$@"
  overhead/report.py record "$W/runs.jsonl" "$W/p0.json" "$W/p1.json" "$W/fio.json" "$IW_IDS" 0 \
    "$bench" iowarden "${2:-1}" "$rnd" "$first" >/dev/null
  overhead/report.py record "$W/runs.jsonl" "$W/p0.json" "$W/p1.json" "$W/fio.json" "$BIO_IDS" 0 \
    "$bench" biolatency "${2:-1}" "$rnd" "$first" >/dev/null
}
side_by_side_round() {  # ROUND
  local first
  for first in iowarden biolatency; do
    if [[ $first == iowarden ]]; then
      start_iowarden $SBS_FLAGS; IW_IDS=$TOOL_IDS; BG_FIRST=$BG; start_biolatency; BIO_IDS=$TOOL_IDS
    else
      start_biolatency; BIO_IDS=$TOOL_IDS; BG_FIRST=$BG; start_iowarden $SBS_FLAGS; IW_IDS=$TOOL_IDS
    fi
    measure_pair "$first" "$1" qd
    measure_pair "$first" "$1" readers "$CPUS"
    stop_bg; BG=$BG_FIRST; BG_FIRST=""; stop_bg
  done
}
if [[ ${MODE:-} == side-by-side ]]; then
  for r in $(seq "$REPS"); do side_by_side_round "$r"; done
  overhead/report.py side-by-side "$W/runs.jsonl"
  exit 0
fi

if [[ ${MODE:-} == locks ]]; then
  LOCK_JOBS=${LOCK_JOBS:-16}
  contended() {  # ns per contention event and events/s under LOCK_JOBS jobs
    echo mq-deadline >"$SCHED_FILE"
    sysctl -qw kernel.bpf_stats_enabled=1
    bpftool prog show -j >"$W/p0.json"
    fio --name=c --filename="$LOOP" --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=16 \
      --numjobs="$LOCK_JOBS" --time_based --runtime="$RUNTIME" --size=1G --group_reporting --output-format=json >/dev/null
    bpftool prog show -j >"$W/p1.json"
    sysctl -qw kernel.bpf_stats_enabled=0
    echo "$SCHED" >"$SCHED_FILE"
    read -r t c < <(overhead/report.py prog-sum "$W/p0.json" "$W/p1.json" "$TOOL_IDS" contention_)
    # One event = one begin + one end run.
    python3 -c "print(2*$t/max($c,1), $c/2/$RUNTIME)"
  }
  declare -a OFF BLK ALL NSB NSA EVB EVA
  for r in $(seq "$REPS"); do
    start_iowarden; read -r iops _ < <(measure iowarden "$r" qd); OFF+=("$iops"); stop_bg
    start_iowarden --locks; read -r iops _ < <(measure locks "$r" qd); BLK+=("$iops")
    read -r ns ev < <(contended); NSB+=("$ns"); EVB+=("$ev"); stop_bg
    start_iowarden --locks-all; read -r iops _ < <(measure locks-all "$r" qd); ALL+=("$iops")
    read -r ns ev < <(contended); NSA+=("$ns"); EVA+=("$ev"); stop_bg
    printf 'round %s: no-locks %.0f IOPS | block-only %.0f IOPS, %.0f ns/event (%.0f events/s) | all %.0f IOPS, %.0f ns/event (%.0f events/s)\n' \
      "$r" "${OFF[-1]}" "${BLK[-1]}" "${NSB[-1]}" "${EVB[-1]}" "${ALL[-1]}" "${NSA[-1]}" "${EVA[-1]}"
  done
  python3 - "${OFF[*]}" "${BLK[*]}" "${ALL[*]}" "${NSB[*]}" "${NSA[*]}" "${EVB[*]}" "${EVA[*]}" <<'PY'
import statistics as st, sys, os
off, blk, al, nsb, nsa, evb, eva = ([float(x) for x in a.split()] for a in sys.argv[1:8])
m = st.median
print(f"\nlock programs, loop device 4 KiB randread QD{os.environ.get('IODEPTH','16')}, medians of {len(off)} interleaved rounds")
print(f"  iowarden (no locks)   {m(off):10.0f} IOPS   ratio 1.000")
print(f"  iowarden --locks      {m(blk):10.0f} IOPS   ratio {m(blk)/m(off):.3f}")
print(f"  iowarden --locks-all  {m(al):10.0f} IOPS   ratio {m(al)/m(off):.3f}")
print(f"  per contention event (begin+end, BPF stats, {os.environ.get('LOCK_JOBS','16')} jobs, mq-deadline):")
print(f"    block-only {m(nsb):.0f} ns at {m(evb):.0f} events/s, all {m(nsa):.0f} ns at {m(eva):.0f} events/s")
PY
  exit 0
fi

# The default comparison. Per round, each tool alone, in turn: fio with no
# tracing; iowarden with defaults; --shards 1 (every CPU shares one shard:
# the atomic adds of hosts with more CPUs than shards); --no-culprits (the
# culprit account off); biolatency (tp_btf, a hash map keyed by request),
# the peer to beat; the floor and the bpftrace script (the QD load only).
start_mode() {
  case $1 in
    none) ;;
    iowarden) start_iowarden ;;
    shards1) start_iowarden --shards 1 ;;
    noculprits) start_iowarden --no-culprits ;;
    biolatency) start_biolatency ;;
    floor) start_floor ;;
    bpftrace) start_bpftrace ;;
  esac
}
clang -O2 -g -target bpf -c overhead/floor.bpf.c -o "$W/floor.bpf.o"
MODES=(none iowarden shards1 noculprits biolatency floor)
if bpftrace -e 'BEGIN { exit(); }' >/dev/null 2>&1; then
  MODES+=(bpftrace)
  # bpftrace finds tracepoints through tracefs.
  if [[ ! -d /sys/kernel/tracing/events ]]; then
    mount -t tracefs nodev /sys/kernel/tracing; MOUNTED_TRACEFS=1
  fi
fi
for r in $(seq "$REPS"); do
  for mode in "${MODES[@]}"; do
    start_mode "$mode"
    measure "$mode" "$r" qd >/dev/null
    if [[ $mode != floor && $mode != bpftrace ]]; then
      for k in "${COUNTS[@]}"; do measure "$mode" "$r" readers "$k" >/dev/null; done
    fi
    stop_bg
  done
  side_by_side_round "$r"
  overhead/report.py round "$W/runs.jsonl" "$r"
done

# What CPUs sharing a shard cost, and the culprit account's record on 1..N
# CPUs (loader/src/cli/bench_shards.rs).
echo
"$IOWARDEN" bench-shards | tee "$W/shards.txt"
sed -n 's/^shards-summary //p' "$W/shards.txt" >"$W/shards.json"
overhead/report.py summary "$W/runs.jsonl" "$W/shards.json"
