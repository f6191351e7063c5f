# vmtest-checks: 6
# vmtest-kernels: 6.1 6.12
# The delays iocost puts on a task of a cgroup in debt on its way back to
# user space (task_delay, `--task-delays`: fentry/fexit on
# blkcg_maybe_throttle_current, off by default):
# between its I/Os, where no latency stage of its I/O sees them. Debt
# comes from I/O iocost must let through at once: swap (REQ_SWAP). A
# weight-100 cgroup (memory.max 32 MiB) walks 96 MiB of memory for 12 s,
# swapping to a dm-linear region of nvme0n1, beside a weight-900 hog of
# direct reads, under a model below the device. Checks: the programs
# attached; the swapper was delayed on nvme0n1 (the disk whose iocost
# set the delay); its delays fit in its one thread's life and average at
# most the kernel's 250 ms clamp per sleep; the hog, throttled by
# waiting, never delayed;
# the swap device's marks that ask no delay (the memory controller's
# swap throttling) not counted; the series exported. (io.latency, the
# other policy that delays tasks here: t-23, on the kernel built with it.)
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
echo +io > $CG/cgroup.subtree_control
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/td-s $CG/td-h
swap_on iow-swap
D=$SWAP_DISK
"$IOWARDEN_BIN" run --listen 127.0.0.1:9616 --interval 1s --task-delays --bpf-stats > $SCRATCH/iowarden-delay.log 2>&1 &
IW=$!
ready http://127.0.0.1:9616/snapshot.json
echo "default 100" > $CG/td-s/io.weight
echo "default 900" > $CG/td-h/io.weight
echo "$MM ctrl=user model=linear rbps=209715200 rseqiops=500 rrandiops=500 wbps=209715200 wseqiops=500 wrandiops=500" > $CG/io.cost.model
echo "$MM enable=1 ctrl=user rpct=95 rlat=20000 wpct=95 wlat=20000 min=100 max=100" > $CG/io.cost.qos
bash -c "echo \$\$ > $CG/td-h/cgroup.procs; exec fio --name=hog --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k \
  --iodepth=32 --offset=1G --size=256M --time_based --runtime=120 --output=/dev/null" & H=$!
echo 32M > $CG/td-s/memory.max
t0=$(date +%s%N)
swapper td-s 12
elapsed_us=$(( ($(date +%s%N) - t0) / 1000 ))
kill $H; wait $H 2>/dev/null
sleep 2.5   # a poll after the swapper's last delay
get http://127.0.0.1:9616/snapshot.json > $SCRATCH/td-snap.json
get http://127.0.0.1:9616/metrics > $SCRATCH/td-metrics.txt
kill $IW; wait $IW 2>/dev/null || true
# What the pair cost per call here (printed: TCG's times; the figure is the
# ratio to the block program, which ran beside it on every request).
python3 - $SCRATCH/td-metrics.txt <<'PY'
import re, sys
run, sec = {}, {}
for l in open(sys.argv[1]):
    m = re.match(r'iowarden_bpf_program_(runs|run_seconds)_total\{program="([^"]+)"\} (\S+)', l)
    if m:
        (run if m[1] == "runs" else sec)[m[2]] = float(m[3])
for p in sorted(run):
    if p.startswith("task_delay") or p.startswith("block_rq_complete") or p == "rq_complete":
        print(f"  cost: {p}: {int(run[p])} runs, {sec.get(p, 0) * 1e9 / max(run[p], 1):.0f} ns per run")
PY
iocost_off $MM
swap_off iow-swap
python3 - $CG $SCRATCH $D $elapsed_us > $SCRATCH/delay-check 2>&1 <<'PY'
import json, os, sys
cg, scratch, swapdev, elapsed_us = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
snap = json.load(open(f"{scratch}/td-snap.json"))
ids = {n: os.stat(f"{cg}/{n}").st_ino for n in ("td-s", "td-h")}
delays = snap.get("task_delays", [])
for d in delays:
    print(f"  {d['cgroup']['path']} on {d['device']['name']}: {d['delays']} delays, {d['seconds']:.3f} s")
status = [p for p in snap["probes"] if p["name"] == "task_delay"]
print(("OK" if status and status[0]["active"] else "BAD"), "active", status)
s = [d for d in delays if d["cgroup"]["id"] == ids["td-s"] and d["device"]["name"] == "nvme0n1"]
n, secs = sum(d["delays"] for d in s), sum(d["seconds"] for d in s)
print(("OK" if n > 0 and secs > 0 else "BAD"), "delayed", f"{n} delays, {secs:.3f} s")
# One thread: its sleeps fit in its life, and the kernel clamps each at
# 250 ms (a wake-up under TCG may come late: 50 ms allowed for it).
mean = secs / max(n, 1)
print(("OK" if 0 < secs <= elapsed_us / 1e6 and mean <= 0.3 else "BAD"), "bounded",
      f"{secs:.3f} s of delays in the swapper's {elapsed_us / 1e6:.1f} s, {mean * 1e3:.1f} ms each")
hog = [d for d in delays if d["cgroup"]["id"] == ids["td-h"]]
print(("OK" if not hog else "BAD"), "hog", hog)
swap = [d for d in delays if d["device"]["name"] == swapdev]
print(("OK" if not swap else "BAD"), "swapdev", swap)
exported = [l for l in open(f"{scratch}/td-metrics.txt") if l.startswith("iowarden_io_task_delay_seconds_total{") and 'cgroup="/td-s"' in l and 'device="nvme0n1"' in l]
print(("OK" if exported and abs(float(exported[0].split()[-1]) - secs) < 1e-9 else "BAD"), "exported", exported)
PY
cat $SCRATCH/delay-check
grep 'task_delay' $SCRATCH/iowarden-delay.log | sed 's/^/  log: /'
ok "task delay: the fentry/fexit programs attached (status active)" "grep -q '^OK active' $SCRATCH/delay-check"
ok "task delay: iocost delayed the swapping cgroup on nvme0n1" "grep -q '^OK delayed' $SCRATCH/delay-check"
ok "task delay: within the swapper's life, each at most the kernel's 250 ms clamp" "grep -q '^OK bounded' $SCRATCH/delay-check"
ok "task delay: the hog (throttled by waiting) was never delayed" "grep -q '^OK hog' $SCRATCH/delay-check"
ok "task delay: the swap device's marks that asked no delay are not counted" "grep -q '^OK swapdev' $SCRATCH/delay-check"
ok "task delay: iowarden_io_task_delay_seconds_total equals the snapshot's" "grep -q '^OK exported' $SCRATCH/delay-check"
rmdir $CG/td-s $CG/td-h 2>/dev/null || true
