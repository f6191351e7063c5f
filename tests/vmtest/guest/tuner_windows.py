"""The tuner's steady state, measured apart from the tuner's own verdicts.

  tuner_windows.py poll URL OUT CGROUP DEVICE
      Records every poll iowarden publishes at URL (/snapshot.json) until
      killed: one JSON line per poll in OUT with the poll's time, the tuner's
      last decision and CGROUP's cumulative read latency histogram (total
      stage) on DEVICE.
  tuner_windows.py steady OUT DECISIONS [FIO_LAT_LOG]
      Prints "P99_MS READS PERIODS STRETCHES": the read p99 over the steady
      state, the judged periods in it, and how many stretches the kernel ran
      at a converged vrate in all. With fio's latency log (written with
      --log_unix_epoch=1: completion time in ms, latency in ns), also
      "FIO_P99_MS FIO_READS IW_P99_MS IW_READS LO_MS HI_MS": fio's own p99 of
      the reads it completed in the steady state from its first logged read
      on (fio logs nothing while it ramps), and iowarden's p99 over the same
      polls with the histogram bucket it lies in.

The steady state is where the tuner settled: from its last "converged"
decision to the end, provided no decision moved vrate since (else there is
none). It is chosen by vrate only, never by whether a period met the SLO: a
miss in it that the tuner took for noise counts against it. An earlier
converged stretch that a confirmed miss ended is the search, not its
result: near the SLO's boundary the device can tip into saturation at a
vrate that met it for periods (t-45-tune.sh), and detecting that and
backing off is the tuner's job; such reopenings are counted and printed by
the caller. Each boundary is the poll its decision was made on (the tuner
decides on that poll's snapshot and publishes it until the next poll,
500 ms later), so no I/O at another vrate leaks in; where that poll was not
caught, the window shrinks to the polls inside it. m-47 imports `record` and
`p99_ms` for its own window.
"""
import json
import re
import sys
import time
import urllib.request

TAKEN_AT = re.compile(rb'"taken_at_unix_seconds":\s*([0-9.eE+-]+)')


def poll(url, out, cgroup, device):
    last = None
    with open(out, "a") as f:
        while True:
            try:
                body = urllib.request.urlopen(url, timeout=5).read()
            except OSError:
                time.sleep(0.1)
                continue
            m = TAKEN_AT.search(body)
            if m and m.group(1) != last:
                last = m.group(1)
                s = json.loads(body)
                f.write(json.dumps(record(s, cgroup, device)) + "\n")
                f.flush()
            time.sleep(0.1)


def record(s, cgroup, device):
    counts = [0] * len(s["hist_lower_bounds_seconds"])
    for x in s["io"]:
        if x["cgroup"]["path"] == cgroup and x["device"]["name"] == device and x["op"] == "read":
            for i, n in enumerate(x["latency"]["total"]["counts"]):
                counts[i] += n
    last = (s.get("tuner") or {}).get("last") or {}
    return {
        "t": s["taken_at_unix_seconds"],
        "decided_at": last.get("at_seconds"),
        "counts": counts,
        "bounds": s["hist_lower_bounds_seconds"],
    }


def stretches(decisions):
    """[(start_at, end_at or None, judged periods)] at a converged vrate."""
    out, cur = [], None
    for d in decisions:
        if cur is not None:
            cur[2] += d["action"] != "insufficient"
            if d["vrate_to"] != cur[3]:
                out.append((cur[0], d["at_seconds"], cur[2]))
                cur = None
        if cur is None and d["action"] == "converged":
            cur = [d["at_seconds"], None, 0, d["vrate_to"]]
    if cur is not None:
        out.append((cur[0], None, cur[2]))
    return out


def p99_bucket_ms(counts, bounds):
    """(p99, bucket low, bucket high) in ms, interpolated in its bucket."""
    nan = float("nan")
    total = sum(counts)
    if total == 0:
        return nan, nan, nan
    rank, acc = max(1, -(-99 * total // 100)), 0
    for i, n in enumerate(counts):
        if acc + n >= rank:
            hi = bounds[i + 1] if i + 1 < len(bounds) else bounds[i] * 2
            return (bounds[i] + (hi - bounds[i]) * (rank - acc) / n) * 1e3, bounds[i] * 1e3, hi * 1e3
        acc += n
    return nan, nan, nan


def p99_ms(counts, bounds):
    return p99_bucket_ms(counts, bounds)[0]


def fio_p99_ms(log, spans):
    """fio's nearest-rank p99 (ms) and count of the reads a latency log
    (time ms since the epoch, latency ns, direction 0 = read) completed
    within any of spans [(t0, t1)] in seconds."""
    lats = []
    for line in open(log):
        f = line.split(",")
        if len(f) < 3 or f[2].strip() != "0":
            continue
        t = int(f[0]) / 1e3
        if any(a < t <= b for a, b in spans):
            lats.append(int(f[1]))
    if not lats:
        return float("nan"), 0
    lats.sort()
    return lats[max(1, -(-99 * len(lats) // 100)) - 1] / 1e6, len(lats)


def settled(decisions):
    """[(start_at, None, judged periods)] for the converged stretch still
    open at the end, or [] when the last one was left."""
    return [s for s in stretches(decisions)[-1:] if s[1] is None]


def windows(polls, decisions, start, since=0.0):
    """iowarden's read counts over the steady state (from `since` on), its
    span as (first poll, last poll) times, its judged periods."""
    slack = 0.05
    counts = [0] * len(polls[0]["counts"]) if polls else []
    spans, periods = [], 0
    for a, b, n in settled(decisions):
        first = next((p for p in polls if p["t"] >= max(start + a - slack, since)), None)
        inside = [p for p in polls if b is None or p["t"] <= start + b + slack]
        if first is None or not inside or inside[-1]["t"] <= first["t"]:
            continue
        last = inside[-1]
        counts = [c + y - x for c, x, y in zip(counts, first["counts"], last["counts"])]
        spans.append((first["t"], last["t"]))
        periods += n
    return counts, spans, periods


def steady(out, decisions_path, fio_log=None):
    polls = [json.loads(l) for l in open(out) if l.endswith("\n")]
    decisions = [json.loads(l) for l in open(decisions_path) if l.endswith("\n")]
    # The tuner's start on the polls' clock: a decision's own poll has
    # t - at_seconds = start (at is read just after the poll); a later poll
    # more.
    decided = [p["t"] - p["decided_at"] for p in polls if p["decided_at"] is not None]
    if not decided:
        print("nan 0 0 0" + (" nan 0 nan 0 nan nan" if fio_log else ""))  # never decided while polled
        return
    start = min(decided)
    counts, spans, periods = windows(polls, decisions, start)
    bounds = polls[0]["bounds"] if polls else []
    line = f"{p99_ms(counts, bounds):.3f} {sum(counts)} {periods} {len(stretches(decisions))}"
    if fio_log:
        logged = [int(l.split(",")[0]) / 1e3 for l in open(fio_log) if l.count(",") >= 2]
        since = min(logged) if logged else float("inf")
        same, spans, _ = windows(polls, decisions, start, since)
        fio_p99, fio_n = fio_p99_ms(fio_log, spans)
        p99, lo, hi = p99_bucket_ms(same, bounds)
        line += f" {fio_p99:.3f} {fio_n} {p99:.3f} {sum(same)} {lo:.3f} {hi:.3f}"
        # fio's parts of it, for the record (stderr): submission, completion.
        for part in ("slat", "clat"):
            path = fio_log.replace("_lat.", f"_{part}.")
            if path != fio_log and __import__("os").path.exists(path):
                print(f"fio {part} p99 {fio_p99_ms(path, spans)[0]:.3f} ms", file=sys.stderr)
    print(line)


if __name__ == "__main__":
    if sys.argv[1] == "poll":
        poll(*sys.argv[2:6])
    else:
        steady(*sys.argv[2:5])
