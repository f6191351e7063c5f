#!/usr/bin/env python3
"""What CPUs sharing a counter shard cost per request, measured where this
machine can (1, 2, 4, ... and its CPUs, `iowarden bench-shards` inside `make bench`) and
modelled beyond: the table overhead/RESULTS.md quotes and an SVG plot.

Usage: contention_model.py OUT.svg BENCH-OUTPUT... (files with a
`bench-summary` line each; the medians over them are used).

The model. A completed request's counter updates write L distinct cache
lines of its shard: the series' first two lines (bytes, cost, random ios,
cursor, the queue and device latency sums), the total stage's histogram
bucket line (`run`'s default counts no queue or device buckets), its
hardware queue's line and its cost class's line: L = 5
(bpf/run_on_demand.bpf.h completion_adds_bench writes the same ones). When
N CPUs complete one series at once, a line was last written by another CPU
with probability (N - 1) / N, and each such write first moves the line:

    t(N) = t(1) + L * (N - 1) / N * c

t(1) is the measured shared-shard cost on one CPU (atomic, uncontended) and
c the cost of moving a modified line between cores. c is calibrated here
from the measured N = 2 point, and taken from published figures for real
hosts: 40 ns within a socket (Intel Memory Latency Checker, modified-line
intervention L2 to L2, Broadwell-EP: 40.3-42.3 ns), and, on two sockets,
half the moves remote at an assumed 100-200 ns (a band, not a citation).
It is the worst case: one series completing on all N CPUs back to back.
A series whose completions stay on one CPU at a time costs t(1).
"""
import json
import math
import statistics
import sys

LINES = 5
SAME_SOCKET_NS = 40.0
REMOTE_NS = (100.0, 200.0)
CPUS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96]


def load(paths):
    rows = {}
    for path in paths:
        for line in open(path):
            if line.startswith("bench-summary "):
                s = json.loads(line.split(" ", 1)[1])
                for r in s["shards"]["rows"]:
                    rows.setdefault(r["cpus"], []).append(r)
    med = lambda n, k: statistics.median(r[k] for r in rows[n])
    return {n: (med(n, "own_shard_ns"), med(n, "shared_shard_ns")) for n in sorted(rows)}


def model(t1, c, n):
    return t1 + LINES * (n - 1) / n * c


def svg(path, measured, curves):
    w, h, left, bottom, top, right = 720, 420, 70, 50, 20, 230
    xmax = max(CPUS)
    ymax = max(max(v) for _, _, v in curves) * 1.1
    x = lambda n: left + (w - left - right) * math.log2(n) / math.log2(xmax)
    y = lambda v: h - bottom - (h - bottom - top) * v / ymax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{left}" y1="{y(0)}" x2="{w - right}" y2="{y(0)}" stroke="black"/>',
           f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{top}" stroke="black"/>']
    for n in CPUS:
        out.append(f'<text x="{x(n)}" y="{h - bottom + 16}" text-anchor="middle">{n}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">CPUs completing one series, sharing its shard</text>')
    step = 100 if ymax > 500 else 50
    for v in range(0, int(ymax) + 1, step):
        out.append(f'<text x="{left - 6}" y="{y(v) + 4}" text-anchor="end">{v}</text>')
        out.append(f'<line x1="{left}" y1="{y(v)}" x2="{w - right}" y2="{y(v)}" stroke="#ddd"/>')
    out.append(f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 {(top + h - bottom) / 2})" text-anchor="middle">ns per request (counter updates)</text>')
    colours = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd"]
    for i, (label, _, v) in enumerate(curves):
        pts = " ".join(f"{x(n):.1f},{y(t):.1f}" for n, t in zip(CPUS, v))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colours[i]}" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{w - right + 8}" y="{top + 16 * i + 10}" fill="{colours[i]}">- - {label}</text>')
    for n, (own, shared) in measured.items():
        out.append(f'<circle cx="{x(n)}" cy="{y(shared)}" r="5" fill="black"/>')
        out.append(f'<circle cx="{x(n)}" cy="{y(own)}" r="5" fill="white" stroke="black"/>')
    k = len(curves)
    out.append(f'<circle cx="{w - right + 12}" cy="{top + 16 * k + 6}" r="5" fill="black"/><text x="{w - right + 22}" y="{top + 16 * k + 10}">measured, shared shard</text>')
    out.append(f'<circle cx="{w - right + 12}" cy="{top + 16 * (k + 1) + 6}" r="5" fill="white" stroke="black"/><text x="{w - right + 22}" y="{top + 16 * (k + 1) + 10}">measured, a shard per CPU</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    measured = load(sys.argv[2:])
    if 2 not in measured:
        sys.exit("contention_model: no 2-CPU point measured (bench-shards needs 2 CPUs)")
    t1 = measured[1][1]
    c_here = (measured[2][1] - t1) / (LINES * 0.5)
    curves = [
        (f"this machine (c = {c_here:.0f} ns, from N = 2)", c_here, [model(t1, c_here, n) for n in CPUS]),
        (f"one socket (c = {SAME_SOCKET_NS:.0f} ns)", SAME_SOCKET_NS, [model(t1, SAME_SOCKET_NS, n) for n in CPUS]),
    ]
    for r in REMOTE_NS:
        c = (SAME_SOCKET_NS + r) / 2
        curves.append((f"two sockets, remote {r:.0f} ns", c, [model(t1, c, n) for n in CPUS]))
    print(f"measured (median of {len(sys.argv) - 2} invocations): " + "; ".join(
        f"{n} CPU(s): a shard each {own:.0f} ns, shared {sh:.0f} ns" for n, (own, sh) in measured.items()))
    print(f"model: t(N) = t(1) + {LINES} lines x (N-1)/N x c, t(1) = {t1:.0f} ns")
    print("| CPUs sharing a shard | " + " | ".join(label for label, _, _ in curves) + " |")
    print("|---" * (len(curves) + 1) + "|")
    for i, n in enumerate(CPUS):
        marks = " (measured)" if n in measured else ""
        print(f"| {n}{marks} | " + " | ".join(f"{v[i]:.0f}" for _, _, v in curves) + " |")
    svg(sys.argv[1], measured, curves)
    print(f"plot: {sys.argv[1]}")


if __name__ == "__main__":
    main()
