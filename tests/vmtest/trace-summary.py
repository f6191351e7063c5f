#!/usr/bin/env python3
"""Where a guest script's time goes, from make vmtest's VMTEST_TRACE files.

Each DIR/SCRIPT.trace line is bash's xtrace with the time and the process:
"+ EPOCHREALTIME BASHPID command". A command's wall time is the gap to the
next line of the same process; only the script's own process (the first
line's) counts, so a background job's time is not counted twice. Prints,
per script, its traced time and its costliest commands (grouped by the
command's first word), then the same over all scripts.

usage: trace-summary.py DIR [TOP]   (TOP: commands listed per script, 5)
"""
import collections
import os
import re
import sys

LINE = re.compile(r"^(\++) (\d+\.\d+) (\d+) (.*)$")


def steps(path):
    """(seconds, command) of each gap between the script's own commands.

    A gap goes to the command before it, unless a command substitution
    (a deeper "+" level in another process) ran in it: then to that."""
    main, prev, sub, out = None, None, None, []
    with open(path, errors="replace") as f:
        for raw in f:
            m = LINE.match(raw.rstrip("\n"))
            if not m:
                continue  # a continuation of a multi-line command
            depth, t, pid, cmd = len(m[1]), float(m[2]), m[3], m[4]
            main = main or pid
            if pid != main:
                if prev and sub is None and depth > prev[2]:
                    sub = cmd
                continue
            if prev:
                out.append((t - prev[0], sub or prev[1]))
            prev, sub = (t, cmd, depth), None
    return out


def word(cmd):
    """The command's program: its first word past assignments and "exec"."""
    for w in cmd.split():
        if "=" in w.split("/")[0] or w in ("exec", "timeout", "taskset"):
            continue
        return os.path.basename(w.strip("'\""))
    return cmd


def main():
    d = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    total = collections.Counter()
    for name in sorted(n for n in os.listdir(d) if n.endswith(".trace")):
        by = collections.Counter()
        for secs, cmd in steps(os.path.join(d, name)):
            by[word(cmd)] += secs
        total.update(by)
        print(f"{name[:-6]}: {sum(by.values()):.1f} s;",
              ", ".join(f"{w} {s:.1f}" for w, s in by.most_common(top)))
    print(f"all: {sum(total.values()):.1f} s;",
          ", ".join(f"{w} {s:.1f}" for w, s in total.most_common(3 * top)))


if __name__ == "__main__":
    main()
