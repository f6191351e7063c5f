#!/usr/bin/env python3
"""Median and range over invocations of `make bench-nvme`
(tests/vmtest/guest/m-36-nvme-cost.sh): reads the `nvme-cost-summary {json}`
lines of the guest logs given (/var/cache/iowarden-vmtest/vmtest-LINE.log,
copied after each run) and prints, per kernel line and mode, the median of
the invocations' medians with their range.

    overhead/nvme_summarize.py run1-6.1.log run2-6.1.log run1-6.12.log ...
"""
import json
import statistics
import sys


def summaries(paths):
    for path in paths:
        for line in open(path, errors="replace"):
            at = line.find("nvme-cost-summary ")
            if at >= 0:
                yield json.loads(line[at + len("nvme-cost-summary "):])


def spread(values, digits=0):
    if not values:
        return "-"
    f = f"{{:.{digits}f}}"
    return f"{f.format(statistics.median(values))} ({f.format(min(values))}-{f.format(max(values))})"


def main(paths):
    by_kernel = {}
    for s in summaries(paths):
        by_kernel.setdefault(s["kernel"], []).append(s)
    if not by_kernel:
        sys.exit("no nvme-cost-summary line in " + " ".join(paths))
    for kernel, runs in sorted(by_kernel.items()):
        print(f"{kernel}: {len(runs)} invocations of {runs[0]['rounds']} rounds; "
              "median (range) of the invocations' medians, per 4 KiB read")
        print("| mode | BPF ns | program runs | CPU ns over no tracing | BPF to biolatency | CPU to biolatency |")
        print("|---|---|---|---|---|---|")
        order = ["none", "defaults", "shards1", "nvme", "biolatency"]
        for mode in sorted(runs[0]["modes"], key=lambda m: order.index(m) if m in order else len(order)):
            ms = [r["modes"][mode] for r in runs if r["modes"].get(mode)]
            med = lambda k: [m[k]["median"] for m in ms if k in m]
            ratio = lambda k: [m["to_biolatency"][k]["median"] for m in ms if k in m.get("to_biolatency", {})]
            print(f"| {mode} | {spread(med('bpf_ns'))} | {spread(med('runs'), 2)} | "
                  f"{spread(med('cpu_over_none_ns'))} | {spread(ratio('bpf'), 2)} | {spread(ratio('cpu'), 2)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
