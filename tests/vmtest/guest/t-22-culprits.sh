# vmtest-checks: 13
# vmtest-kernels: 6.1 6.12
# The culprit account under the shipped defaults, on NVMe: a QD1 4 KiB
# reader (the victim) alone, beside a
# 128 KiB sequential writer at QD16, beside the writer and a QD32 4 KiB
# random reader, and alone under its own io.max (riops=100), each in a
# cgroup of its own. Alone, nothing of its device time is behind others;
# beside the writer, at least 80 % of its wait is behind it and at most
# 10 % behind the idle reader; beside both, at least 80 % behind the two,
# split within 0.1 of their shares of the device time; its service and its
# waits tile its device time within 5 %; under its io.max, its own limits
# hold at least 80 % of its time; beside the writer under iocost weights
# (iocost holds the writer, most of its time: what the victim still waits
# for in the device is ~5 % of its time), at least 80 % of that behind the
# writer and at most 10 % behind the idle reader; beside the writer under
# BFQ (which serves one cgroup's queue at a time: the victim waits in the
# scheduler, behind the writer's requests it issues first), at least 80 %
# of its waits in the scheduler and on the device behind the writer and at
# most 10 % behind the idle reader; the family is exported. Then 32, 64
# and 256 cgroups, each a QD1 reader of its own stretch, at once: no
# request goes untold and every one's account tiles its device time
# within 10 % (past the 16 series it names per device, the waits behind
# the rest are there as culprit "other").
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/cu-v $CG/cu-w $CG/cu-r
# With the systemd unit's capabilities only (its CapabilityBoundingSet):
# root's exec gets its bounding set, as under the unit.
setpriv --bounding-set -all,+bpf,+perfmon,+sys_resource \
  "$IOWARDEN_BIN" run --listen 127.0.0.1:9622 --interval 500ms --device $DEV > $SCRATCH/iowarden-culprits.log 2>&1 &
IW=$!
ready http://127.0.0.1:9622/snapshot.json $IW
kill -0 $IW 2>/dev/null || { echo "iowarden run exited:"; tail -40 $SCRATCH/iowarden-culprits.log; }
# nice:name of each thread (nice is stat's 19th field, 17th after "pid (comm) ").
nices=$(for t in /proc/$IW/task/*; do echo "$(sed 's/.*) //' $t/stat | awk '{print $17}'):$(cat $t/comm)"; done | tr '\n' ' ')
ok "culprits: under the systemd unit's capabilities (CAP_BPF, CAP_PERFMON, CAP_SYS_RESOURCE) the drain runs at nice -20, every other thread at 0 ($nices)" \
  "[ \$(echo '$nices' | tr ' ' '\n' | grep -c '^-20:iowarden-culpri\$') = 1 ] && [ \$(echo '$nices' | tr ' ' '\n' | grep -v '^-20:iowarden-culpri\$' | grep -cv '^0:\|^\$') = 0 ]"
# The account replays requests up to 1 s behind (its horizon's most), then
# a poll (500 ms) takes it: 1.7 s after a phase its window is whole.
snap() { sleep 1.7; get http://127.0.0.1:9622/snapshot.json > $SCRATCH/cu-$1.json; }
# cgroup secs fio-args...
in_cg() { local c=$1 s=$2; shift 2; bash -c "echo \$\$ > $CG/$c/cgroup.procs; exec fio --name=$c --filename=/dev/$DEV --direct=1 --time_based --runtime=$s --output=/dev/null $*"; }
victim() { in_cg cu-v 3 --ioengine=psync --rw=randread --bs=4k --size=256M; }
# The neighbours in the background: $W and $R (a bare `wait` would wait for the daemon too).
writer() { in_cg cu-w 5 --ioengine=libaio --rw=write --bs=128k --iodepth=16 --offset=1G --size=512M & W=$!; }
reader() { in_cg cu-r 5 --ioengine=libaio --rw=randread --bs=4k --iodepth=32 --offset=512M --size=256M & R=$!; }
snap 0
victim; snap 1
writer; sleep 0.5; victim; wait $W; snap 2
writer; reader; sleep 0.5; victim; wait $W $R; snap 3
echo "$MM riops=100" > $CG/cu-v/io.max
victim; snap 4
echo "$MM rbps=max wbps=max riops=max wiops=max" > $CG/cu-v/io.max
# Under iocost weights: a model that prices the writer's 128 KiB writes
# at ~5 ms of device time and the victim's reads at 0.05 ms, vrate pinned
# at 100 %, the victim at weight 1000 beside the writer at 100. iocost
# holds the writer (its throttle stage), never the victim, and what the
# victim waited for in the device is still behind the writer's requests.
echo "default 1000" > $CG/cu-v/io.weight; echo "default 100" > $CG/cu-w/io.weight
echo "$MM ctrl=user model=linear rbps=2147483648 rseqiops=20000 rrandiops=20000 wbps=52428800 wseqiops=400 wrandiops=400" > $CG/io.cost.model
echo "$MM enable=1 ctrl=user rpct=95 rlat=20000 wpct=95 wlat=20000 min=100 max=100" > $CG/io.cost.qos
writer; sleep 0.5; victim; wait $W; snap 5
iocost_off $MM
echo "default 100" > $CG/cu-v/io.weight
modprobe bfq 2>/dev/null
sched=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$DEV/queue/scheduler)
echo bfq > /sys/block/$DEV/queue/scheduler
cat /sys/block/$DEV/queue/scheduler > $SCRATCH/cu-sched
writer; sleep 0.5; victim; wait $W; snap 6
echo "$sched" > /sys/block/$DEV/queue/scheduler
get http://127.0.0.1:9622/metrics > $SCRATCH/cu-metrics.txt
# N cgroups at once, each a direct QD1 reader of its own 512 KiB: every
# reader joins its cgroup and blocks on a FIFO until all have (the FIFO's
# one writer, this shell, closes it), then all start together. No polling
# and no timer: under TCG 256 shells waking up, or a timeout's own start,
# take longer than a reader's run.
many() {
  local n=$1 i
  rm -rf $SCRATCH/many; mkdir $SCRATCH/many; mkfifo $SCRATCH/many/go
  exec 3<>$SCRATCH/many/go
  for i in $(seq $n); do mkdir -p $CG/cm-$i; done
  for i in $(seq $n); do
    (exec 3>&-; echo $BASHPID > $CG/cm-$i/cgroup.procs; exec 4<$SCRATCH/many/go
     touch $SCRATCH/many/$i; read -r _ <&4
     exec dd if=/dev/$DEV of=/dev/null bs=4k iflag=direct skip=$((i * 1024)) count=128 2>/dev/null) &
  done
  while [ $(ls $SCRATCH/many | wc -l) -le $n ]; do sleep 0.2; done
  exec 3>&-
  wait $(jobs -p | grep -vx $IW)
}
snap m0
many 32; snap m32
many 64; snap m64
many 256; snap m256
for i in $(seq 256); do rmdir $CG/cm-$i; done
python3 - $SCRATCH > $SCRATCH/culprits-check 2>&1 <<'PY'
import json, sys
scratch = sys.argv[1]
S = [json.load(open(f"{scratch}/cu-{i}.json")) for i in range(7)]
def delta(a, b, key, fields):
    old = {key(x): x for x in a}
    return [{**x, **{f: x[f] - old.get(key(x), {}).get(f, 0) for f in fields}} for x in b]
def window(i):
    c = delta(S[i - 1]["culprits"], S[i]["culprits"],
              lambda x: (x["victim"]["path"], x["op"], x["stage"], (x["culprit"] or {}).get("path"), x["culprit_op"]),
              ["seconds"])
    io = {}
    for s0, s1 in ((S[i - 1], S[i]),):
        old = {(x["cgroup"]["path"], x["op"]): x for x in s0["io"] if x["device"]["name"] == "nvme0n1"}
        for x in s1["io"]:
            if x["device"]["name"] != "nvme0n1":
                continue
            o = old.get((x["cgroup"]["path"], x["op"]))
            lat = lambda y, st: y["latency"][st]["sum_seconds"] if y else 0.0
            e = io.setdefault(x["cgroup"]["path"], [0.0, 0.0, 0.0])
            for j, st in enumerate(("throttle", "queue", "device")):
                e[j] += lat(x, st) - lat(o, st)
    # On the device, and in the scheduler (under one).
    by, queued = {}, {}
    for x in c:
        if x["victim"]["path"] == "/cu-v" and x["device"]["name"] == "nvme0n1":
            k = (x["culprit"] or {}).get("path", "")
            part = queued if x["stage"] == "queue" else by
            part[k] = part.get(k, 0.0) + x["seconds"]
    return by, queued, io
def line(ok, name, text):
    print("OK" if ok else "BAD", name, text)
for i, phase in ((1, "alone"), (2, "writer"), (3, "both"), (5, "iocost")):
    by, _, io = window(i)
    dev = io.get("/cu-v", [0, 0, 0])[2]
    own = by.get("/cu-v", 0.0)
    others = sum(s for k, s in by.items() if k not in ("", "/cu-v"))
    excess = others + own
    said = f"victim device time {dev:.3f} s, account {by}, device time {({k: round(v[2], 3) for k, v in io.items()})}"
    if phase == "alone":
        line(dev > 0 and others <= 0.01 * dev, "alone", said)
        continue
    tile = by.get("", 0.0) + others
    share = lambda k: by.get(k, 0.0) / excess if excess else 0.0
    if phase == "writer":
        line(share("/cu-w") >= 0.8 and share("/cu-r") <= 0.1, "writer", said)
    elif phase == "iocost":
        held = io.get("/cu-w", [0, 0, 0])[0]
        line(share("/cu-w") >= 0.8 and share("/cu-r") <= 0.1 and held > 0, "iocost",
             f"iocost held the writer {held:.3f} s, the victim {io.get('/cu-v', [0, 0, 0])[0]:.3f} s; {said}")
    else:
        dw, dr = io.get("/cu-w", [0, 0, 0])[2], io.get("/cu-r", [0, 0, 0])[2]
        split = by.get("/cu-w", 0.0) / max(by.get("/cu-w", 0.0) + by.get("/cu-r", 0.0), 1e-12)
        occ = dw / max(dw + dr, 1e-12)
        line(share("/cu-w") + share("/cu-r") >= 0.8 and abs(split - occ) <= 0.1, "both",
             f"writer's part {split:.3f} of the two, its part of their device time {occ:.3f}; {said}")
    # (Not under iocost: the tiling is checked in the phases above.)
    if phase != "iocost":
        line(dev > 0 and abs(tile - dev) <= 0.05 * dev, f"tile-{phase}", f"service and waits behind others {tile:.3f} s; {said}")
by, _, io = window(4)
t, q, d = io.get("/cu-v", [0, 0, 0])
line(t + q + d > 0 and t >= 0.8 * (t + q + d), "iomax", f"held {t:.3f} s, queued {q:.3f} s, device {d:.3f} s")
# Under BFQ: its waits on the device and in the scheduler, together.
by, queued, io = window(6)
_, q, d = io.get("/cu-v", [0, 0, 0])
waits = {k: by.get(k, 0.0) + queued.get(k, 0.0) for k in set(by) | set(queued) if k}
total = sum(waits.values())
share = lambda k: waits.get(k, 0.0) / total if total else 0.0
sched = open(f"{scratch}/cu-sched").read().strip()
line("[bfq]" in sched and total > 0 and share("/cu-w") >= 0.8 and share("/cu-r") <= 0.1, "bfq",
     f"scheduler {sched}; victim queued {q:.3f} s, device time {d:.3f} s; on the device {by}, in the scheduler {queued}")
PY
python3 - $SCRATCH >> $SCRATCH/culprits-check 2>&1 <<'PY'
import json, sys
scratch = sys.argv[1]
S = {k: json.load(open(f"{scratch}/cu-{k}.json")) for k in ("m0", "m32", "m64", "m256")}
def seconds(snap, key, pick):
    out = {}
    for x in snap[key]:
        if x["device"]["name"] == "nvme0n1" and pick(x):
            p = x["victim" if key == "culprits" else "cgroup"]["path"]
            out[p] = out.get(p, 0.0) + (x["seconds"] if key == "culprits" else x["latency"]["device"]["sum_seconds"])
    return out
prev = "m0"
for n in (32, 64, 256):
    a, b = S[prev], S[f"m{n}"]
    ours = lambda p: p.startswith("/cm-") and int(p[4:]) <= n
    dev = {p: v - seconds(a, "io", lambda x: True).get(p, 0.0) for p, v in seconds(b, "io", lambda x: True).items() if ours(p)}
    acc = {p: v - seconds(a, "culprits", lambda x: x["stage"] == "device").get(p, 0.0)
           for p, v in seconds(b, "culprits", lambda x: x["stage"] == "device").items() if ours(p)}
    late, lost = (b["drops"][k] - a["drops"][k] for k in ("culprit_late", "culprit_lost"))
    worst = max((abs(acc.get(p, 0.0) - d) / d for p, d in dev.items() if d > 0), default=1.0)
    seen = sum(1 for d in dev.values() if d > 0)
    other = any((x["culprit"] or {}).get("path") == "other" for x in b["culprits"])
    good = late == 0 and lost == 0 and seen == n and worst <= 0.1 and (n <= 16 or other)
    print("OK" if good else "BAD", f"many-{n}",
          f"{seen} of {n} cgroups with I/O, requests untold: {late} outlived the horizon, {lost} lost from the log, accounts within {worst * 100:.2f} % of their device time, behind other cgroups: {other}")
    prev = f"m{n}"
PY
cat $SCRATCH/culprits-check
for n in alone writer both tile-writer tile-both iomax iocost bfq many-32 many-64 many-256; do
  ok "culprits: $n" "grep -q '^OK $n ' $SCRATCH/culprits-check"
done
ok "culprits: the family is exported, the victim behind the writer" \
  "grep -q '^iowarden_culprit_seconds_total{device=\"$DEV\",victim=\"/cu-v\",op=\"read\",stage=\"device\",culprit=\"/cu-w\",culprit_op=\"write\"}' $SCRATCH/cu-metrics.txt"
kill $IW; wait $IW 2>/dev/null
rmdir $CG/cu-v $CG/cu-w $CG/cu-r
