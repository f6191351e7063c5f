#!/usr/bin/env python3
"""The arithmetic of overhead/run.sh (`make bench`): one fio run's record,
a round's line, and the report whose last line is `bench-summary {json}`.

  report.py record RUNS P0 P1 FIO IDS CPU_NS BENCH MODE READERS ROUND
      appends one run to RUNS (JSON lines) and prints "iops ns_per_io
      detail": P0/P1 `bpftool prog show -j` before and after fio ("-" for
      an untraced run), FIO fio's JSON output, IDS the ids of the tool's
      programs (those loaded while it started), CPU_NS the tool process's
      CPU time over the run; detail is each program's
      "name=ns_per_run/runs_per_io/recursion_misses".
  report.py prog-sum P0 P1 IDS PREFIX
      "run_time_ns runs" gained by the tool's programs named PREFIX*.
      FIRST (optional): the tool attached first, in a side-by-side run.
  report.py round RUNS ROUND      the round's figures on one line.
  report.py side-by-side RUNS     the side-by-side runs' report alone.
  report.py summary RUNS SHARDS   the report; SHARDS holds bench-shards'
      `shards-summary` JSON. Exits non-zero when one of iowarden's programs
      missed a run.
Facts about the run (scheduler, CPU model, ...) come from the environment:
RUNTIME, IODEPTH, SCHED, CPU_MODEL, KERNEL, BACKING_FS, READER_CPUS.
"""
import collections
import json
import os
import statistics
import sys

# Tools in the order of the report; the keys of bench-summary.
TOOLS = {"iowarden": "iowarden", "shards1": "iowarden --shards 1", "noculprits": "iowarden --no-culprits",
         "biolatency": "biolatency", "bpftrace": "bpftrace"}
IOWARDEN_MODES = ("iowarden", "shards1", "noculprits")


def progs(path, ids):
    """{name: (run_time_ns, run_cnt, recursion_misses)} of the programs `ids`."""
    if path == "-":
        return {}
    out = collections.defaultdict(lambda: [0, 0, 0])
    for p in json.load(open(path)):
        if p["id"] in ids:
            o = out[p.get("name", "?")]
            o[0] += p.get("run_time_ns", 0)
            o[1] += p.get("run_cnt", 0)
            # bpftool leaves the field out while it is 0.
            o[2] += p.get("recursion_misses", 0)
    return {n: tuple(v) for n, v in out.items()}


def gained(p0, p1):
    """What each program gained between the two listings."""
    return {n: tuple(b - a for a, b in zip(p0.get(n, (0, 0, 0)), v)) for n, v in p1.items()}


def record(runs, p0, p1, fio, ids, cpu_ns, bench, mode, readers, rnd, first=None):
    ids = {int(i) for i in ids.split()}
    read = json.load(open(fio))["jobs"][0]["read"]  # group_reporting: all jobs in one
    ios = float(read["total_ios"])
    per = {n: {"ns_per_run": dt / dc, "runs_per_io": dc / ios, "misses": dm}
           for n, (dt, dc, dm) in sorted(gained(progs(p0, ids), progs(p1, ids)).items()) if dc}
    ns = sum(v["ns_per_run"] * v["runs_per_io"] for v in per.values())
    rec = {"bench": bench, "mode": mode, "readers": int(readers), "round": int(rnd),
           "iops": read["iops"], "ios": ios, "ns_per_io": ns, "cpu_ns_per_io": int(cpu_ns) / ios, "progs": per}
    if first:
        rec["first"] = first
    with open(runs, "a") as f:
        f.write(json.dumps(rec) + "\n")
    detail = " ".join(f"{n}={v['ns_per_run']:.0f}/{v['runs_per_io']:.2f}/{v['misses']}" for n, v in per.items())
    print(read["iops"], ns, detail)


def prog_sum(p0, p1, ids, prefix):
    g = gained(progs(p0, {int(i) for i in ids.split()}), progs(p1, {int(i) for i in ids.split()}))
    print(sum(v[0] for n, v in g.items() if n.startswith(prefix)),
          sum(v[1] for n, v in g.items() if n.startswith(prefix)))


def load(runs):
    return [json.loads(line) for line in open(runs) if line.strip()]


def round_line(runs, rnd):
    recs = [r for r in load(runs) if r["round"] == int(rnd)]
    qd = {r["mode"]: r for r in recs if r["bench"] == "qd"}
    parts = [f"none {qd['none']['iops']:.0f} IOPS"] if "none" in qd else []
    for mode, label in TOOLS.items():
        if mode in qd:
            parts.append(f"{label} {qd[mode]['ns_per_io']:.0f} ns/I/O")
    if "floor" in qd:
        parts.append("floor " + ", ".join(f"{n} {v['ns_per_run']:.0f}" for n, v in qd["floor"]["progs"].items()))
    print(f"round {rnd}: QD{os.environ['IODEPTH']}: " + " | ".join(parts))
    for k in sorted({r["readers"] for r in recs if r["bench"] == "readers"}):
        by = {r["mode"]: r for r in recs if r["bench"] == "readers" and r["readers"] == k}
        print(f"  {k} reader(s): " + " | ".join(
            f"{TOOLS.get(m, 'untraced')} {r['iops']:.0f} IOPS" + (f" {r['ns_per_io']:.0f} ns/I/O" if m != "none" else "")
            for m, r in by.items()))


m = lambda v: statistics.median(v) if v else float("nan")
misses = collections.Counter()  # recursion misses by run kind, tool and program, every round


def per_program(recs, key):
    """Median ns per run and runs per fio I/O, by program, over rounds; the
    recursion misses counted under `key`."""
    ns, runs = collections.defaultdict(list), collections.defaultdict(list)
    for r in recs:
        for name, v in r["progs"].items():
            ns[name].append(v["ns_per_run"])
            runs[name].append(v["runs_per_io"])
            misses[f"{key} {name}"] += v["misses"]
    return {n: (m(ns[n]), m(runs[n])) for n in sorted(ns)}


def qd_report(recs, summary):
    """The single-job comparison at IODEPTH: the figures RESULTS.md quotes."""
    by = collections.defaultdict(list)
    for r in recs:
        by[r["mode"]].append(r)
    iops = {mode: m([r["iops"] for r in v]) for mode, v in by.items()}
    nsio = {mode: m([r["ns_per_io"] for r in v]) for mode, v in by.items()}
    none = iops["none"]
    print(f"\nloop device (scheduler {os.environ['SCHED']}), 4 KiB randread QD{os.environ['IODEPTH']}, one job, "
          f"{os.environ['RUNTIME']} s per run, medians of {len(by['none'])} interleaved rounds")
    print("  IOPS: none %.0f; " % none + "; ".join(
        f"{label} {iops[mode]:.0f} ({iops[mode] / none:.3f})" for mode, label in TOOLS.items() if mode in by))
    print("  BPF time per fio I/O (BPF stats on; every device the I/O crosses: the loop device and its backing disk):")
    bio = nsio["biolatency"]
    for mode, label in TOOLS.items():
        if mode in by:
            print(f"    {label:24s} {nsio[mode]:6.0f} ns   ratio to biolatency {nsio[mode] / bio:.2f}")
    cpu = {mode: m([r["cpu_ns_per_io"] for r in v]) for mode, v in by.items()}
    print("  the tool's process, CPU time per fio I/O (all threads; iowarden's user-space side): " +
          ", ".join(f"{label} {cpu[mode]:.0f} ns" for mode, label in TOOLS.items() if mode in by))
    floor = {p: ns for p, (ns, _) in per_program(by["floor"], "floor").items()}
    print("  the floor (a program that returns at once, BPF stats' clock reads included): " +
          ", ".join(f"{p} {ns:.0f} ns a run" for p, ns in floor.items()))
    summary.update({"floor_ns_per_run": floor, "biolatency_ns_per_io": bio})
    for mode in ("iowarden", "shards1", "noculprits"):
        summary[f"{mode}_ns_per_io"] = nsio[mode]
        summary[f"{mode}_ratio"] = nsio[mode] / bio
    summary["process_cpu_ns_per_io"] = {mode: cpu[mode] for mode in TOOLS if mode in by}
    for mode in ("iowarden", "shards1", "noculprits", "biolatency"):
        per = per_program(by[mode], mode)
        f = lambda p: floor.get(p.removesuffix("_btf"), float("nan"))
        body = {p: ns - f(p) for p, (ns, _) in per.items()}
        # Over the programs that ran about once per I/O (a requeue now and then is not).
        ios = sum(body[p] * r for p, (_, r) in per.items() if r >= 0.01)
        print(f"  {TOOLS[mode]} per program: " + ", ".join(
            f"{p} {ns:.0f} ns ({body[p]:.0f} above the floor) x {r:.2f} runs" for p, (ns, r) in per.items()) +
            f"; {ios:.0f} ns per fio I/O above the floor")
        summary[f"{mode}_above_floor_ns_per_io"] = ios
        summary[f"{mode}_per_program"] = {p: {"ns_per_run": ns, "above_floor": body[p], "runs_per_io": r}
                                          for p, (ns, r) in per.items()}
    print("  (target: iowarden <= 1/3 of biolatency on both paths)")


def readers_report(recs, summary):
    """Readers pinned one per CPU, QD1 each: per reader count and mode."""
    counts = sorted({r["readers"] for r in recs})
    cpus = os.environ["READER_CPUS"].split(",")
    print(f"\nreaders pinned one per CPU (CPUs {','.join(cpus)} in that order; {os.environ['CPU_MODEL']}), "
          f"each 4 KiB randread at QD1 (psync), all in one cgroup, loop device (scheduler {os.environ['SCHED']}), "
          f"{os.environ['RUNTIME']} s per run, medians of {len({r['round'] for r in recs})} interleaved rounds")
    print(f"  {'readers':>7}  {'mode':24s} {'ns/I/O':>7} {'x biolat':>8} {'runs/I/O':>8} {'IOPS':>9} {'x untraced':>10}"
          f" {'CPU ns/I/O':>10}")
    rows = []
    for k in counts:
        by = collections.defaultdict(list)
        for r in recs:
            if r["readers"] == k:
                by[r["mode"]].append(r)
        none = m([r["iops"] for r in by["none"]])
        bio = m([r["ns_per_io"] for r in by["biolatency"]])
        row = {"readers": k, "none": {"iops": none}}
        print(f"  {k:>7}  {'untraced':24s} {'':>7} {'':>8} {'':>8} {none:9.0f} {1:10.3f}")
        for mode in ("iowarden", "shards1", "noculprits", "biolatency"):
            v = by[mode]
            ns, iops = m([r["ns_per_io"] for r in v]), m([r["iops"] for r in v])
            runs = m([sum(p["runs_per_io"] for p in r["progs"].values()) for r in v])
            cpu = m([r["cpu_ns_per_io"] for r in v])
            per_program(v, f"readers{k} {mode}")
            row[mode] = {"ns_per_io": ns, "runs_per_io": runs, "iops": iops,
                         "ratio": ns / bio, "iops_ratio": iops / none, "process_cpu_ns_per_io": cpu}
            print(f"  {k:>7}  {TOOLS[mode]:24s} {ns:7.0f} {ns / bio:8.2f} {runs:8.2f} {iops:9.0f} {iops / none:10.3f}"
                  f" {cpu:10.0f}")
        rows.append(row)
    first, last = rows[0], rows[-1]
    print("  the culprit account (defaults against --no-culprits): " + ", ".join(
        f"{r['readers']} reader(s) {r['iowarden']['ns_per_io'] - r['noculprits']['ns_per_io']:+.0f} ns/I/O"
        for r in rows))
    if last is not first:
        print(f"  defaults at {last['readers']} readers against 1: "
              f"{last['iowarden']['ns_per_io'] / first['iowarden']['ns_per_io']:.2f}x ns per I/O")
    print("  (targets: defaults <= 1/3 of biolatency, flat from 1 to N readers, IOPS within 5 % of untraced)")
    summary["readers_per_cpu"] = {"cpus": [int(c) for c in cpus], "engine": "psync", "rows": rows}


def side_by_side_report(recs, summary):
    """iowarden and biolatency attached at once: the ratio of their BPF
    time per fio I/O in each run (the same requests), per load; its median
    and range over runs, and the median per tool attached first."""
    loads = sorted({(r["bench"], r["readers"]) for r in recs})
    flags = os.environ.get("SBS_FLAGS") or "defaults"
    print(f"\nside by side: iowarden ({flags}) and biolatency attached at once, loop device (scheduler "
          f"{os.environ['SCHED']}), {os.environ['RUNTIME']} s per run, each round in both orders of attachment, "
          f"{len({r['round'] for r in recs})} rounds")
    out = {}
    for bench, k in loads:
        runs = collections.defaultdict(dict)
        for r in recs:
            if (r["bench"], r["readers"]) == (bench, k):
                runs[(r["round"], r["first"])][r["mode"]] = r
        pairs = {key: v for key, v in runs.items() if "iowarden" in v and "biolatency" in v}
        ratio = lambda v: v["iowarden"]["ns_per_io"] / v["biolatency"]["ns_per_io"]
        ratios = [ratio(v) for v in pairs.values()]
        by_first = {f: m([ratio(v) for key, v in pairs.items() if key[1] == f]) for f in ("iowarden", "biolatency")}
        iw = m([v["iowarden"]["ns_per_io"] for v in pairs.values()])
        bio = m([v["biolatency"]["ns_per_io"] for v in pairs.values()])
        load = f"QD{os.environ['IODEPTH']}, one job" if bench == "sbs-qd" else f"{k} readers pinned one per CPU, QD1"
        print(f"  {load}: iowarden {iw:.0f} ns per fio I/O, biolatency {bio:.0f}; ratio {m(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} runs; iowarden first "
              f"{by_first['iowarden']:.3f}, biolatency first {by_first['biolatency']:.3f})")
        out["qd" if bench == "sbs-qd" else f"readers{k}"] = {
            "iowarden_ns_per_io": iw, "biolatency_ns_per_io": bio, "ratio": m(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "ratio_iowarden_first": by_first["iowarden"],
            "ratio_biolatency_first": by_first["biolatency"], "runs": len(ratios)}
        for v in pairs.values():
            for mode in ("iowarden", "biolatency"):
                per_program([v[mode]], f"side-by-side {mode}")
    print("  (target: iowarden <= 1/3 of biolatency)")
    summary["side_by_side"] = out


def side_by_side(runs):
    recs = [r for r in load(runs) if r["bench"].startswith("sbs-")]
    s = {"date": os.popen("date -u +%F").read().strip(), "sched": os.environ["SCHED"],
         "cpu_model": os.environ["CPU_MODEL"], "kernel": os.environ["KERNEL"],
         "rounds": len({r["round"] for r in recs}), "iowarden_flags": os.environ.get("SBS_FLAGS", "")}
    side_by_side_report(recs, s)
    print("bench-side-by-side " + json.dumps(s, sort_keys=True))


def shards_report(shards):
    rows = shards["rows"]
    flight = [r["flight_log_ns"] for r in rows if "flight_log_ns" in r]
    if len(flight) > 1:
        print(f"  culprit record at {rows[-1]['cpus']} CPUs against 1: {flight[-1] / flight[0]:.2f}x")


def summary(runs, shards_path):
    recs = load(runs)
    shards = json.load(open(shards_path))
    shards_report(shards)
    s = {"date": os.popen("date -u +%F").read().strip(), "rounds": len({r["round"] for r in recs}),
         "sched": os.environ["SCHED"], "cpu_model": os.environ["CPU_MODEL"], "kernel": os.environ["KERNEL"],
         "backing_fs": os.environ["BACKING_FS"], "shards": shards}
    qd_report([r for r in recs if r["bench"] == "qd"], s)
    readers_report([r for r in recs if r["bench"] == "readers"], s)
    if any(r["bench"].startswith("sbs-") for r in recs):
        side_by_side_report([r for r in recs if r["bench"].startswith("sbs-")], s)
    s["recursion_misses"] = dict(misses)
    print("  recursion misses (runs the kernel skipped, their events lost): " +
          (", ".join(f"{k} {v}" for k, v in sorted(misses.items()) if v) or "none"))
    print("bench-summary " + json.dumps(s, sort_keys=True))
    lost = {k: v for k, v in misses.items() if v and k.split()[-2] in IOWARDEN_MODES}
    if lost:
        sys.exit(f"iowarden's programs missed runs (their figures leave those out): {lost}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"record": record, "prog-sum": prog_sum, "round": round_line, "summary": summary,
     "side-by-side": side_by_side}[cmd](*args)
