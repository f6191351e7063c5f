#!/bin/bash
# Tracing overhead on one loop device, in one invocation: fio IOPS with no
# tracing, with iowarden (defaults), with iowarden --shards 1 (the atomic
# adds of hosts with more CPUs than shards), with the peer everyone has,
# bcc's libbpf-tools biolatency (Debian package libbpf-tools), with a
# bpftrace biolatency-style script where bpftrace starts, and with the floor
# (overhead/floor.bpf.c: a program that returns at once on each block_rq_*
# tracepoint); interleaved over REPS rounds. BPF stats are on only while fio
# runs: kernel-measured ns per fio I/O (all programs, every device the I/O
# crosses), ns per run and runs per fio I/O of each program, the ratios to
# biolatency, and each tool's time above the floor. The last line,
# `bench-summary {json}`, holds the figures overhead/RESULTS.md quotes
# for the default mode (time per I/O, CPUs sharing a shard);
# overhead/summarize.py gives their median and range over invocations.
# Env: REPS (5), RUNTIME (s per fio run, 6), IODEPTH (16).
#
# MODE=locks: what the lock-contention programs cost. Against iowarden
# without them (the default) in the same invocation: IOPS at the load above
# with --locks (block-layer stacks only) and with --locks-all; and the
# kernel-measured ns per contention event (contention_begin + contention_end
# run time over their runs) under a contended load (LOCK_JOBS jobs on the
# same loop device with mq-deadline selected for it).
#
# MODE=cost: what charging the linear cost model costs. iowarden with
# --no-cost against iowarden (cost on, the default), interleaved: IOPS and
# kernel-measured ns per I/O of the block_rq_* programs.
#
# MODE=culprits: what --culprits costs (overhead/culprits-cost.sh: iowarden
# without and with it and biolatency, REPS rounds; SCHED picks the loop
# device's I/O scheduler).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ ${MODE:-} == culprits ]] && exec overhead/culprits-cost.sh "${REPS:-3}"
IOWARDEN=${IOWARDEN:-target/release/iowarden}
REPS=${REPS:-5}; RUNTIME=${RUNTIME:-6}; IODEPTH=${IODEPTH:-16}
# The report below reads them from its environment.
export RUNTIME IODEPTH
[[ $(id -u) -eq 0 ]] || { echo "run as root" >&2; exit 1; }
W=$(mktemp -d /var/tmp/iowarden-bench.XXXXXX)
LOOP=""; BG=""; MOUNTED_TRACEFS=""
cleanup() {
  [[ -n $BG ]] && kill "$BG" 2>/dev/null && wait "$BG" 2>/dev/null || true
  sysctl -qw kernel.bpf_stats_enabled=0 || true
  # Leave the machine as found: a tracefs left mounted hides, from later
  # runs, what a fresh machine lacks.
  [[ -n $MOUNTED_TRACEFS ]] && umount /sys/kernel/tracing || true
  [[ -n $LOOP ]] && losetup -d "$LOOP" || true
  rm -rf "$W"
}
trap cleanup EXIT INT TERM
truncate -s 1G "$W/disk.img"
LOOP=$(losetup -f --show --direct-io=on "$W/disk.img")
# Pre-fill so reads hit allocated blocks.
dd if=/dev/zero of="$LOOP" bs=1M count=1024 oflag=direct status=none

fio_iops() {
  fio --name=bench --filename="$LOOP" --direct=1 --ioengine=libaio --rw=randread --bs=4k \
    --iodepth="$IODEPTH" --time_based --runtime="$RUNTIME" --size=1G --output-format=json |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print(j["iops"], j["total_ios"])'
}

start_iowarden() {
  "$IOWARDEN" run --listen 127.0.0.1:19699 --interval 1s >"$W/iowarden.log" 2>&1 & BG=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:19699/snapshot.json >/dev/null && return; sleep 0.1; done
  echo "iowarden did not start: $(cat "$W/iowarden.log")" >&2; exit 1
}

# Debian 12's bpftrace has no raw tracepoints and this kernel no kprobes: the
# request is identified by (dev, sector) on the classic tracepoints instead.
BT='tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; }
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ {
  @usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000); delete(@start[args->dev, args->sector]); }'
start_bpftrace() {
  ulimit -l unlimited 2>/dev/null || true
  bpftrace -e "$BT" >"$W/bt.log" 2>&1 & BG=$!
  for _ in $(seq 300); do grep -q Attaching "$W/bt.log" && { sleep 1; return; }; sleep 0.1; done
  echo "bpftrace did not attach: $(cat "$W/bt.log")" >&2; exit 1
}
stop_bg() {  # bpftrace has been seen to hang on SIGTERM: SIGKILL after 5 s
  kill "$BG" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$BG" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$BG" 2>/dev/null || true
  wait "$BG" 2>/dev/null || true; BG=""
}

# bpftool here cannot name a program's process: iowarden's programs are the
# only "tracing" (tp_btf) ones on block_rq_*, bpftrace's the "tracepoint" ones.
# recursion_misses: runs the kernel skipped because the program was already
# running on that CPU (bpftool leaves the field out while it is 0): events
# lost, and time not counted.
prog_stats() {  # "run_time_ns run_cnt details" summed over programs of BPF type $1 named $2* (block_rq_)
  bpftool prog show -j | python3 -c '
import json,sys
kind=sys.argv[1]; prefix=sys.argv[2]; t=c=0; per=[]
for p in json.load(sys.stdin):
    if p.get("type")==kind and p.get("name","").startswith(prefix):
        rt, rc = p.get("run_time_ns",0), p.get("run_cnt",0)
        t+=rt; c+=rc; per.append((p.get("name","?"), rt, rc, p.get("recursion_misses",0)))
print(t, c, json.dumps(per).replace(" ", ""))' "$1" "${2:-block_rq_}"
}

measured_fio() {  # fio IOPS, BPF ns per fio I/O of the programs of BPF type $1, and per program "name=ns_per_run/runs_per_io/recursion_misses"
  sysctl -qw kernel.bpf_stats_enabled=1
  read -r t0 _ p0 < <(prog_stats "$1")
  read -r iops ios < <(fio_iops)
  read -r t1 _ p1 < <(prog_stats "$1")
  sysctl -qw kernel.bpf_stats_enabled=0
  python3 -c '
import json, sys
p0 = {n: (t, c, r) for n, t, c, r in json.loads(sys.argv[1])}
ios = float(sys.argv[3]); tot = 0; per = []
for n, t, c, r in json.loads(sys.argv[2]):
    t0, c0, r0 = p0.get(n, (0, 0, 0))
    dt, dc = t - t0, c - c0
    tot += dt
    if dc: per.append("%s=%.0f/%.2f/%d" % (n, dt / dc, dc / ios, r - r0))
print(sys.argv[4], tot / ios, " ".join(per))' "$p0" "$p1" "$ios" "$iops"
}

if [[ ${MODE:-} == cost ]]; then
  start_iowarden_args() {
    "$IOWARDEN" run --listen 127.0.0.1:19699 --interval 1s "$@" >"$W/iowarden.log" 2>&1 & BG=$!
    for _ in $(seq 100); do curl -sf http://127.0.0.1:19699/snapshot.json >/dev/null && return; sleep 0.1; done
    echo "iowarden did not start: $(cat "$W/iowarden.log")" >&2; exit 1
  }
  declare -a OFFI OFFN ONI ONN
  for r in $(seq "$REPS"); do
    start_iowarden_args --no-cost; read -r iops ns d0 < <(measured_fio tracing); OFFI+=("$iops"); OFFN+=("$ns"); stop_bg
    start_iowarden_args; read -r iops ns d1 < <(measured_fio tracing); ONI+=("$iops"); ONN+=("$ns"); stop_bg
    printf 'round %s: --no-cost %.0f IOPS, %.0f ns/I/O (%s) | cost %.0f IOPS, %.0f ns/I/O (%s)\n' \
      "$r" "${OFFI[-1]}" "${OFFN[-1]}" "$d0" "${ONI[-1]}" "${ONN[-1]}" "$d1"
  done
  python3 - "${OFFI[*]}" "${OFFN[*]}" "${ONI[*]}" "${ONN[*]}" <<'PY'
import statistics as st, sys, os
offi, offn, oni, onn = ([float(x) for x in a.split()] for a in sys.argv[1:5])
m = st.median
print(f"\ncost model, loop device 4 KiB randread QD{os.environ.get('IODEPTH','16')}, medians of {len(offi)} interleaved rounds")
print(f"  iowarden --no-cost {m(offi):10.0f} IOPS   {m(offn):6.0f} ns BPF per I/O")
print(f"  iowarden (cost)    {m(oni):10.0f} IOPS   {m(onn):6.0f} ns BPF per I/O   (+{m(onn)-m(offn):.0f} ns, IOPS ratio {m(oni)/m(offi):.3f})")
PY
  exit 0
fi

if [[ ${MODE:-} == locks ]]; then
  LOCK_JOBS=${LOCK_JOBS:-16}
  start_iowarden_with() {
    "$IOWARDEN" run --listen 127.0.0.1:19699 --interval 1s "$@" >"$W/iowarden.log" 2>&1 & BG=$!
    for _ in $(seq 100); do curl -sf http://127.0.0.1:19699/snapshot.json >/dev/null && return; sleep 0.1; done
    echo "iowarden did not start: $(cat "$W/iowarden.log")" >&2; exit 1
  }
  contended() {  # ns per contention event and events/s under LOCK_JOBS jobs
    local dev; dev=$(basename "$LOOP")
    echo mq-deadline >"/sys/block/$dev/queue/scheduler"
    sysctl -qw kernel.bpf_stats_enabled=1
    read -r t0 c0 _ < <(prog_stats tracing contention_)
    fio --name=c --filename="$LOOP" --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=16 \
      --numjobs="$LOCK_JOBS" --time_based --runtime="$RUNTIME" --size=1G --group_reporting --output-format=json >/dev/null
    read -r t1 c1 _ < <(prog_stats tracing contention_)
    sysctl -qw kernel.bpf_stats_enabled=0
    echo none >"/sys/block/$dev/queue/scheduler"
    # One event = one begin + one end run.
    python3 -c "print(2*($t1-$t0)/max($c1-$c0,1), ($c1-$c0)/2/$RUNTIME)"
  }
  declare -a OFF BLK ALL NSB NSA EVB EVA
  for r in $(seq "$REPS"); do
    start_iowarden_with; read -r iops _ < <(fio_iops); OFF+=("$iops"); stop_bg
    start_iowarden_with --locks; read -r iops _ < <(fio_iops); BLK+=("$iops")
    read -r ns ev < <(contended); NSB+=("$ns"); EVB+=("$ev"); stop_bg
    start_iowarden_with --locks-all; read -r iops _ < <(fio_iops); ALL+=("$iops")
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

# The default comparison. Per round, interleaved: fio with no tracing;
# iowarden with defaults; iowarden --shards 1 (every CPU shares one shard:
# the atomic adds of hosts with more CPUs than shards); bcc's libbpf-tools
# biolatency (tp_btf, a hash map keyed by request), the peer to beat; and
# the bpftrace script above. Each tracer runs alone, so the tracing
# programs named block_rq_* are its own.
run_tool() {  # name start-command... ; prints "iops ns_per_io runs_per_io per-program"
  local name=$1; shift
  "$@"
  read -r iops ns detail < <(measured_fio "$KIND")
  stop_bg
  echo "$iops $ns $detail"
}
start_biolatency() {
  /usr/sbin/biolatency 3600 >"$W/biolatency.log" 2>&1 & BG=$!
  # It attaches within a second; wait until its programs are loaded.
  for _ in $(seq 100); do
    bpftool prog show -j | grep -q '"block_rq_complete_btf"' && { sleep 0.5; return; }
    sleep 0.1
  done
  echo "biolatency did not start: $(cat "$W/biolatency.log")" >&2; exit 1
}
start_iowarden_atomic() {
  "$IOWARDEN" run --listen 127.0.0.1:19699 --interval 1s --shards 1 >"$W/iowarden.log" 2>&1 & BG=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:19699/snapshot.json >/dev/null && return; sleep 0.1; done
  echo "iowarden did not start: $(cat "$W/iowarden.log")" >&2; exit 1
}
start_floor() {
  overhead/floor.py "$W/floor.bpf.o" >"$W/floor.log" 2>&1 & BG=$!
  for _ in $(seq 100); do grep -q attached "$W/floor.log" && return; sleep 0.1; done
  echo "the floor's programs did not attach: $(cat "$W/floor.log")" >&2; exit 1
}
clang -O2 -g -target bpf -c overhead/floor.bpf.c -o "$W/floor.bpf.o"
HAVE_BT=1
bpftrace -e 'BEGIN { exit(); }' >/dev/null 2>&1 || HAVE_BT=0
# bpftrace finds tracepoints through tracefs. Mounted here, in this shell:
# the tools start in subshells (`< <(run_tool ...)`), where a mount's flag
# was lost and the tracefs left behind.
if ((HAVE_BT)) && [[ ! -d /sys/kernel/tracing/events ]]; then
  mount -t tracefs nodev /sys/kernel/tracing; MOUNTED_TRACEFS=1
fi

declare -a NONE IOW IOA BIO BTR NSIO NSIA NSBIO NSBT DIOW DIOA DBIO DFL
for r in $(seq "$REPS"); do
  read -r iops _ < <(fio_iops); NONE+=("$iops")
  KIND=tracing; read -r iops ns d < <(run_tool iowarden start_iowarden); IOW+=("$iops"); NSIO+=("$ns"); DIOW+=("$d")
  read -r iops ns d < <(run_tool iowarden-atomic start_iowarden_atomic); IOA+=("$iops"); NSIA+=("$ns"); DIOA+=("$d")
  read -r iops ns d < <(run_tool biolatency start_biolatency); BIO+=("$iops"); NSBIO+=("$ns"); DBIO+=("$d")
  KIND=tracing; read -r _ _ d < <(run_tool floor start_floor); DFL+=("$d")
  if ((HAVE_BT)); then
    KIND=tracepoint; read -r iops ns _ < <(run_tool bpftrace start_bpftrace); BTR+=("$iops"); NSBT+=("$ns")
  fi
  printf 'round %s: none %.0f IOPS | iowarden %.0f ns/I/O (%s) | --shards 1 %.0f ns/I/O | biolatency %.0f ns/I/O (%s) | floor %s%s\n' \
    "$r" "${NONE[-1]}" "${NSIO[-1]}" "${DIOW[-1]}" "${NSIA[-1]}" "${NSBIO[-1]}" "${DBIO[-1]}" "${DFL[-1]}" \
    "$( ((HAVE_BT)) && printf ' | bpftrace %.0f ns/I/O' "${NSBT[-1]}")"
done

# What CPUs sharing a shard cost: the completion's counter updates on 1..N
# CPUs at once, a shard each and one shared (loader/src/cli/bench_shards.rs).
echo
"$IOWARDEN" bench-shards | tee "$W/shards.txt"
SHARDS=$(sed -n 's/^shards-summary //p' "$W/shards.txt")

python3 - "${NONE[*]}" "${IOW[*]}" "${IOA[*]}" "${BIO[*]}" "${BTR[*]:-}" "${NSIO[*]}" "${NSIA[*]}" "${NSBIO[*]}" "${NSBT[*]:-}" \
  "$(printf '%s\n' "${DIOW[@]}")" "$(printf '%s\n' "${DBIO[@]}")" "$(printf '%s\n' "${DIOA[@]}")" \
  "$(printf '%s\n' "${DFL[@]}")" "$SHARDS" <<'PY'
import statistics as st, sys, os, collections, json
f = lambda a: [float(x) for x in a.split()]
none, iow, ioa, bio, btr, nsio, nsia, nsbio, nsbt = (f(a) for a in sys.argv[1:10])
m = lambda v: st.median(v) if v else float("nan")
misses = collections.Counter()  # recursion misses by tool and program, every round
def per_prog(lines, tool=None):  # median ns per run and runs per fio I/O, by program
    ns, runs = collections.defaultdict(list), collections.defaultdict(list)
    for line in lines.splitlines():
        for item in line.split():
            name, rest = item.split("=")
            a, b, missed = rest.split("/")
            ns[name].append(float(a)); runs[name].append(float(b))
            if tool:
                misses[f"{tool} {name}"] += int(missed)
    return {n: (m(ns[n]), m(runs[n])) for n in sorted(ns)}
print(f"\nloop device, 4 KiB randread QD{os.environ['IODEPTH']}, {os.environ['RUNTIME']} s per run, medians of {len(none)} interleaved rounds")
print(f"  IOPS: none {m(none):.0f}; iowarden {m(iow):.0f} ({m(iow)/m(none):.3f}); --shards 1 {m(ioa):.0f} ({m(ioa)/m(none):.3f}); "
      f"biolatency {m(bio):.0f} ({m(bio)/m(none):.3f})" + (f"; bpftrace {m(btr):.0f} ({m(btr)/m(none):.3f})" if btr else ""))
print("  BPF time per fio I/O (BPF stats on; every device the I/O crosses: the loop device and its backing disk):")
for name, v in (("iowarden", nsio), ("iowarden --shards 1", nsia), ("biolatency", nsbio), ("bpftrace", nsbt)):
    if v:
        print(f"    {name:20s} {m(v):6.0f} ns   ratio to biolatency {m(v)/m(nsbio):.2f}")
floor = {p: ns for p, (ns, _) in per_prog(sys.argv[13]).items()}
tracepoint = lambda p: p.removesuffix("_btf")
def above_floor(per):  # ns per fio I/O above the floor, and each program's ns per run above it
    f = lambda p: floor.get(tracepoint(p), float("nan"))
    # Over the programs that ran about once per I/O (a requeue now and then is not).
    ios = sum((ns - f(p)) * r for p, (ns, r) in per.items() if r >= 0.01)
    return ios, {p: ns - f(p) for p, (ns, _) in per.items()}
print("  the floor (a program that returns at once, BPF stats' clock reads included): " +
      ", ".join(f"{p} {ns:.0f} ns a run" for p, ns in floor.items()))
summary = {"date": os.popen("date -u +%F").read().strip(), "rounds": len(none),
           "iowarden_ns_per_io": m(nsio), "shards1_ns_per_io": m(nsia), "biolatency_ns_per_io": m(nsbio),
           "iowarden_ratio": m(nsio) / m(nsbio), "shards1_ratio": m(nsia) / m(nsbio),
           "floor_ns_per_run": floor, "shards": json.loads(sys.argv[14])}
for name, key, lines in (("iowarden", "iowarden", sys.argv[10]), ("iowarden --shards 1", "shards1", sys.argv[12]),
                         ("biolatency", "biolatency", sys.argv[11])):
    per = per_prog(lines, key)
    ios, body = above_floor(per)
    print(f"  {name} per program: " + ", ".join(
        f"{p} {ns:.0f} ns ({body[p]:.0f} above the floor) x {r:.2f} runs" for p, (ns, r) in per.items()) +
        f"; {ios:.0f} ns per fio I/O above the floor")
    summary[f"{key}_above_floor_ns_per_io"] = ios
    summary[f"{key}_per_program"] = {p: {"ns_per_run": ns, "above_floor": body[p], "runs_per_io": r}
                                     for p, (ns, r) in per.items()}
print("  (target: iowarden <= 1/3 of biolatency on both paths)")
summary["recursion_misses"] = dict(misses)
print("  recursion misses (runs the kernel skipped, their events lost): " +
      (", ".join(f"{k} {v}" for k, v in sorted(misses.items()) if v) or "none"))
print("bench-summary " + json.dumps(summary, sort_keys=True))
lost = {k: v for k, v in misses.items() if v and not k.startswith("biolatency")}
if lost:
    sys.exit(f"iowarden's programs missed runs (their figures leave those out): {lost}")
PY
