# vmtest-checks: 2
# vmtest-kernels: 6.1 6.12
# What tracing costs on NVMe, dispatch included (issue 36), in one guest:
# interleaved rounds of fio 4 KiB random reads at QD16 on the emulated NVMe
# with no tracing, iowarden's defaults (`iowarden run`, what users run),
# `--shards 1` (the path of hosts with more CPUs than shards), `--nvme` (the
# NVMe queue programs, off by default), and bcc's libbpf-tools biolatency (the peer). Each run is measured twice:
#   bpf: run time per read of every BPF program loaded (the kernel's
#        bpf_stats, on for every mode, adding its ~20 ns per run to each),
#        and program runs per read;
#   cpu: the whole guest's busy CPU time per read (/proc/stat: user, system,
#        irq, softirq), and its excess over the rounds' no-tracing median:
#        what the tool costs with each program's dispatch, the agent's own
#        polling and everything the kernel does to run it.
# TCG's speed swings with the host's load: the ratios of modes measured side
# by side are the figure, not the times. Order rotates each round.
# `make bench-nvme` runs it on 6.1 and 6.12 (VMTEST_ONLY=m-36-nvme-cost
# tests/vmtest/run.sh); the console and the line's log show the table and a
# `nvme-cost-summary {json}` line, overhead/RESULTS.md quotes them.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; exit 0; }
ROUNDS=5; IOS=100000
PORT=9636
OUT=$SCRATCH/nvme-cost.txt; : > $OUT
MODES="none defaults shards1 nvme biolatency"
sysctl -qw kernel.bpf_stats_enabled=1

# Busy jiffies of the whole guest (USER_HZ) and the BPF programs' run time
# (ns), runs and recursion misses (runs the kernel skipped because the
# program was already running on that CPU: events lost; bpftool leaves the
# field out while it is 0), summed over every program loaded.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
bpf_sums() {
  bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
ps = [p for p in json.load(sys.stdin) if p.get("type") in ("tracing", "raw_tracepoint", "tracepoint")]
print(sum(p.get("run_time_ns", 0) for p in ps), sum(p.get("run_cnt", 0) for p in ps), len(ps),
      sum(p.get("recursion_misses", 0) for p in ps))'
}
BG=""
start_mode() {
  case $1 in
    none) return 0 ;;
    biolatency) /usr/sbin/biolatency 600 1 > $SCRATCH/nc-bl.log 2>&1 & BG=$!
      for _ in $(seq 300); do [ "$(bpf_sums | cut -d' ' -f3)" -gt 0 ] && { sleep 0.5; return 0; }; sleep 0.1; done
      echo "biolatency did not load: $(tail -1 $SCRATCH/nc-bl.log)"; return 1 ;;
    defaults) set -- ;;
    shards1) set -- --shards 1 ;;
    nvme) set -- --nvme ;;
  esac
  "$IOWARDEN_BIN" run --listen 127.0.0.1:$PORT "$@" > $SCRATCH/nc-iw.log 2>&1 & BG=$!
  ready "http://127.0.0.1:$PORT/metrics" "$BG" && { sleep 0.5; return 0; }
  echo "iowarden did not start: $(tail -2 $SCRATCH/nc-iw.log)"; return 1
}
stop_mode() { [ -n "$BG" ] && { kill $BG 2>/dev/null; wait $BG 2>/dev/null; }; BG=""; }

set -- $MODES; n=$#
for r in $(seq $ROUNDS); do
  # Rotate the order: each mode runs first once in every $n rounds.
  order=$(echo $MODES | tr ' ' '\n' | awk -v k=$(( (r - 1) % n )) -v n=$n '{ m[NR-1] = $0 } END { for (i = 0; i < n; i++) print m[(i + k) % n] }')
  for m in $order; do
    start_mode $m || { stop_mode; continue; }
    read t0 c0 p0 x0 < <(bpf_sums); b0=$(busy)
    fio --name=nc --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=16 \
      --number_ios=$IOS --size=1G --output-format=json --output=$SCRATCH/nc-fio.json > /dev/null 2>&1
    b1=$(busy); read t1 c1 p1 x1 < <(bpf_sums)
    stop_mode
    read ios iops < <(python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jobs'][0]['read']; print(j['total_ios'], j['iops'])" $SCRATCH/nc-fio.json)
    row="NVMECOST round=$r mode=$m ios=$ios iops=$iops bpf_ns=$((t1 - t0)) runs=$((c1 - c0)) progs=$p1 busy_ticks=$((b1 - b0)) misses=$((x1 - x0))"
    echo "$row" >> $OUT; echo "  $row"
  done
done
sysctl -qw kernel.bpf_stats_enabled=0

python3 - $OUT "$(getconf CLK_TCK)" "$MODES" "${VMTEST_KERNEL_LINE:-custom}" <<'PY' | sed 's/^/  /'
import json, statistics, sys
rows = [dict(kv.split("=") for kv in l.split()[1:]) for l in open(sys.argv[1])]
hz, modes, line = int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
per = lambda r, k: float(r[k]) / max(int(r["ios"]), 1)
cpu_ns = lambda r: per(r, "busy_ticks") * 1e9 / hz
none_cpu = statistics.median([cpu_ns(r) for r in rows if r["mode"] == "none"] or [0])
def figures(r):
    return {"bpf_ns": per(r, "bpf_ns"), "runs": per(r, "runs"), "cpu_ns": cpu_ns(r),
            "cpu_over_none_ns": cpu_ns(r) - none_cpu, "iops": float(r["iops"]),
            "recursion_misses": float(r.get("misses", 0))}
by = {m: [figures(r) for r in rows if r["mode"] == m] for m in modes}
summary = {"kernel": line, "rounds": max((int(r["round"]) for r in rows), default=0), "modes": {}}
fmt = lambda xs: f"{statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})" if xs else "-"
print(f"nvme cost on {line}: median (range) over rounds, per 4 KiB read")
print(f"{'mode':<11} {'bpf ns':>18} {'runs':>6} {'cpu ns':>20} {'cpu over none':>20} {'IOPS':>18}")
for m in modes:
    f = by[m]
    col = lambda k: [x[k] for x in f]
    summary["modes"][m] = {k: {"median": statistics.median(col(k)), "min": min(col(k)), "max": max(col(k))} for k in f[0]} if f else {}
    runs = f"{statistics.median(col('runs')):.2f}" if f else "-"
    print(f"{m:<11} {fmt(col('bpf_ns')):>18} {runs:>6} {fmt(col('cpu_ns')):>20} {fmt(col('cpu_over_none_ns')):>20} {fmt(col('iops')):>18}")
# Ratios to biolatency, round by round (the modes ran side by side).
peer = {r["round"]: figures(r) for r in rows if r["mode"] == "biolatency"}
for m in modes:
    if m in ("none", "biolatency"):
        continue
    ratios = {"bpf": [], "cpu": []}
    for r in rows:
        if r["mode"] != m or r["round"] not in peer:
            continue
        f, p = figures(r), peer[r["round"]]
        if p["bpf_ns"] > 0:
            ratios["bpf"].append(f["bpf_ns"] / p["bpf_ns"])
        if p["cpu_over_none_ns"] > 0:
            ratios["cpu"].append(f["cpu_over_none_ns"] / p["cpu_over_none_ns"])
    summary["modes"][m]["to_biolatency"] = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in ratios.items() if v}
    two = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
    print(f"{m:<11} to biolatency: bpf {two(ratios['bpf'])}, cpu over none {two(ratios['cpu'])}")
print("nvme-cost-summary " + json.dumps(summary, sort_keys=True))
PY
measured=$(awk '{print $3}' $OUT | sort | uniq -c | awk -v r=$ROUNDS '$1 == r' | wc -l)
ok "every mode measured in each of $ROUNDS rounds" "[ $measured -eq $(echo $MODES | wc -w) ]"
missed=$(awk '$3 != "mode=biolatency" { for (i = 4; i <= NF; i++) if ($i ~ /^misses=/) { sub("misses=", "", $i); s += $i } } END { print s + 0 }' $OUT)
ok "iowarden's programs missed no run (recursion misses: $missed)" "[ $missed -eq 0 ]"
