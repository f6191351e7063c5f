#!/usr/bin/env python3
"""Median and range, over `make bench` invocations, of the figures
overhead/RESULTS.md quotes, of the readers pinned one per CPU and of the
side-by-side runs: give it the invocations' output (files holding a
`bench-summary` line each, or a `bench-side-by-side` line for
MODE=side-by-side), all under one I/O scheduler."""
import json, statistics, sys

runs = []
for path in sys.argv[1:]:
    lines = [l for l in open(path) if l.startswith(("bench-summary ", "bench-side-by-side "))]
    if not lines:
        sys.exit(f"summarize: {path} has no bench-summary line (an interrupted run?)")
    runs.append(json.loads(lines[-1].split(" ", 1)[1]))
if len(runs) < 3:
    print(f"summarize: {len(runs)} invocation(s); overhead/RESULTS.md quotes at least 3", file=sys.stderr)

def row(label, values, fmt):
    v = sorted(x for x in values if x == x)  # NaN: a program with no floor twin
    if not v:
        return
    print(f"  {label:44s} median {fmt(statistics.median(v))}, range {fmt(v[0])}-{fmt(v[-1])}")

# Older invocations (before the scheduler was set) ran under the loop
# device's own, unrecorded; figures under two schedulers do not mix.
scheds = {r.get("sched", "unrecorded") for r in runs}
if len(scheds) > 1:
    sys.exit(f"summarize: the invocations ran under different I/O schedulers ({', '.join(sorted(scheds))}): "
             "summarize each scheduler's apart")
print(f"{len(runs)} invocations of make bench, {', '.join(sorted({r['date'] for r in runs}))}, "
      f"{'/'.join(str(r.get('rounds', '?')) for r in runs)} rounds each, scheduler {scheds.pop()}, "
      f"{'; '.join(sorted({r.get('cpu_model', 'CPU unrecorded') for r in runs}))}")
ratio, ns = (lambda x: f"{x:.2f}"), (lambda x: f"{x:.0f} ns")

# iowarden and biolatency attached at once (the ratio within each run).
sbs = [r["side_by_side"] for r in runs if "side_by_side" in r]
if len({r.get("iowarden_flags", "") for r in runs if "side_by_side" in r}) > 1:
    sys.exit("summarize: the side-by-side invocations ran iowarden with different flags: summarize each apart")
for load in sorted({k for r in sbs for k in r}):
    pts = [r[load] for r in sbs if load in r]
    print(f"  side by side, {load} ({len(pts)} invocation(s)):")
    row("  iowarden / biolatency, the same requests", [p["ratio"] for p in pts], lambda x: f"{x:.3f}")
    row("  iowarden, BPF per fio I/O", [p["iowarden_ns_per_io"] for p in pts], ns)
    row("  biolatency, BPF per fio I/O", [p["biolatency_ns_per_io"] for p in pts], ns)
runs = [r for r in runs if "iowarden_ratio" in r]  # the rest: from full invocations only
if not runs:
    sys.exit(0)
row("iowarden / biolatency (defaults)", [r["iowarden_ratio"] for r in runs], ratio)
row("iowarden --shards 1 / biolatency", [r["shards1_ratio"] for r in runs], ratio)
# Invocations before the culprit account was on by default had no
# --no-culprits run.
row("iowarden --no-culprits / biolatency", [r["noculprits_ratio"] for r in runs if "noculprits_ratio" in r], ratio)
row("iowarden, BPF per fio I/O", [r["iowarden_ns_per_io"] for r in runs], ns)
row("iowarden --shards 1, BPF per fio I/O", [r["shards1_ns_per_io"] for r in runs], ns)
row("iowarden --no-culprits, BPF per fio I/O", [r["noculprits_ns_per_io"] for r in runs if "noculprits_ns_per_io" in r], ns)
row("biolatency, BPF per fio I/O", [r["biolatency_ns_per_io"] for r in runs], ns)
for key, label in (("iowarden", "iowarden"), ("noculprits", "iowarden --no-culprits"), ("biolatency", "biolatency")):
    row(f"{label}, its process's CPU per fio I/O",
        [r["process_cpu_ns_per_io"][key] for r in runs if key in r.get("process_cpu_ns_per_io", {})], ns)
def above_floor(per):
    """ns per fio I/O above the floor, over programs that ran (an earlier
    floor had no requeue or merge program)."""
    return sum(p["above_floor"] * p["runs_per_io"] for p in per.values() if p["runs_per_io"] >= 0.01)

for key, label in (("iowarden", "iowarden"), ("shards1", "iowarden --shards 1"),
                   ("noculprits", "iowarden --no-culprits"), ("biolatency", "biolatency")):
    if not all(f"{key}_per_program" in r for r in runs):
        continue
    row(f"{label}, above the floor per fio I/O", [above_floor(r[f"{key}_per_program"]) for r in runs], ns)
    # Programs that ran about once per fio I/O (a requeue now and then is not quoted).
    progs = {p for r in runs for p, v in r[f"{key}_per_program"].items() if v["runs_per_io"] >= 0.01}
    for p in sorted(progs):
        per = [r[f"{key}_per_program"][p] for r in runs if p in r[f"{key}_per_program"]]
        row(f"  {p}, a run", [v["ns_per_run"] for v in per], ns)
        row(f"  {p}, above the floor", [v["above_floor"] for v in per], ns)
for p in sorted({p for r in runs for p in r["floor_ns_per_run"]}):
    row(f"floor {p}, a run", [r["floor_ns_per_run"][p] for r in runs if p in r["floor_ns_per_run"]], ns)
for n in sorted({row_["cpus"] for r in runs for row_ in r["shards"]["rows"]}):
    pts = [row_ for r in runs for row_ in r["shards"]["rows"] if row_["cpus"] == n]
    row(f"counter updates, {n} CPU(s), a shard each", [p["own_shard_ns"] for p in pts], ns)
    row(f"counter updates, {n} CPU(s), one shared shard", [p["shared_shard_ns"] for p in pts], ns)
    row(f"culprit record, {n} CPU(s), a ring each", [p["flight_log_ns"] for p in pts if "flight_log_ns" in p], ns)

# Readers pinned one per CPU at QD1, per reader count and mode.
per_cpu = [r["readers_per_cpu"] for r in runs if "readers_per_cpu" in r]
for k in sorted({row_["readers"] for r in per_cpu for row_ in r["rows"]}):
    pts = [row_ for r in per_cpu for row_ in r["rows"] if row_["readers"] == k]
    print(f"  {k} reader(s) pinned one per CPU, QD1 ({len(pts)} invocation(s)):")
    row("  untraced, IOPS", [p["none"]["iops"] for p in pts], lambda x: f"{x:.0f}")
    for mode, label in (("iowarden", "iowarden"), ("shards1", "iowarden --shards 1"),
                        ("noculprits", "iowarden --no-culprits"), ("biolatency", "biolatency")):
        row(f"  {label}, BPF per fio I/O", [p[mode]["ns_per_io"] for p in pts], ns)
        if mode != "biolatency":
            row(f"  {label} / biolatency", [p[mode]["ratio"] for p in pts], ratio)
        row(f"  {label}, runs per fio I/O", [p[mode]["runs_per_io"] for p in pts], ratio)
        row(f"  {label}, IOPS / untraced", [p[mode]["iops_ratio"] for p in pts], lambda x: f"{x:.3f}")
        row(f"  {label}, its process's CPU per fio I/O", [p[mode]["process_cpu_ns_per_io"] for p in pts
                                                          if "process_cpu_ns_per_io" in p[mode]], ns)
