# vmtest-checks: 12
# vmtest-kernels: 6.1 6.12
# `iowarden limits`: every io knob set on the cgroups, judged over its
# window while each cgroup reads. Each verdict is one a user meets: io.max
# that holds the reads (acting, with the hold), io.max far above the load
# (idle), a default io.weight read through a dm volume iocost never ran on
# (not in effect there: no weight-based policy) and, with iocost configured
# on nvme0n1 but enable=0, on the disk beneath (enable=0), io.bfq.weight
# where the scheduler is not bfq, a limit
# on a dm volume while the cgroup reads the disk beneath directly, and a
# cgroup whose parent does not delegate io (not in effect, each with its
# reason). A cgroup path that does not exist is refused before anything.
# `iowarden run` (4 s windows) exports the same verdicts as
# iowarden_limit_state{state, reason} while the first window is judged.
# Two more a user meets on a volume: a write limit on a disk that carries
# a vfat mount, under which a cgroup did no I/O while it holds dirty pages:
# the flusher writes them back charged to the root (io.stat shows the
# escape; the same limit under ext4 is charged), and limits the kernel dropped when their dm volume was
# re-created with another number, or removed (`run` remembers them).
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
echo +io > $CG/cgroup.subtree_control
echo +memory > $CG/cgroup.subtree_control   # cgroup writeback needs memory and io
modprobe dm-mod; modprobe bfq 2>/dev/null
dmsetup create --noudevsync iow-limlin --table "0 131072 linear /dev/$DEV 2097152"
LIN_DISK=$(dm_disk iow-limlin); LIN=$(dev_mm "$LIN_DISK")
mkdir -p $CG/lm-max $CG/lm-idle $CG/lm-w $CG/lm-bfq $CG/lm-dm $CG/lm-p/lm-c
echo "$MM riops=200" > $CG/lm-max/io.max
echo "$MM riops=100000" > $CG/lm-idle/io.max
echo "default 50" > $CG/lm-w/io.weight   # per device only where iocost was ever on
[ -e $CG/lm-bfq/io.bfq.weight ] && echo "default 300" > $CG/lm-bfq/io.bfq.weight
echo "$LIN riops=200" > $CG/lm-dm/io.max
reads() { # cgroup offset [file]: 3 s of QD1 4 KiB reads (on the disk)
  bash -c "echo \$\$ > $CG/$1/cgroup.procs; exec fio --name=${1#*/} --filename=${3:-/dev/$DEV} --direct=1 --ioengine=psync \
    --rw=randread --bs=4k --offset=$2 --size=32M --time_based --runtime=3 --output=/dev/null"
}
judge() { # out-file: limits over a 4 s window while every cgroup reads
  "$IOWARDEN_BIN" limits --wait 4s --json > $1 2> $1.log & local L=$!
  sleep 0.5
  local p=() i=0
  for c in lm-max lm-idle lm-bfq lm-dm lm-p/lm-c; do reads $c $((i * 64))M & p+=($!); i=$((i + 1)); done
  # lm-w reads through the dm volume (never under iocost): its default
  # weight is judged there and on nvme0n1 beneath.
  reads lm-w 0 /dev/mapper/iow-limlin & p+=($!)
  wait "${p[@]}" $L
}
[ -n "$LIN_DISK" ] || echo "  no disk for iow-limlin: $(ls /sys/block)"
# A process that stays in lm-c (a workload whose parent does not delegate io).
bash -c "echo \$\$ > $CG/lm-p/lm-c/cgroup.procs; exec sleep 120" & S=$!
"$IOWARDEN_BIN" run --listen 127.0.0.1:9618 --interval 1s --limits-window 4s > $SCRATCH/limits-run.log 2>&1 & R=$!
ready http://127.0.0.1:9618/metrics "$R"
( while :; do curl -sf http://127.0.0.1:9618/metrics | grep '^iowarden_limit_state{' >> $SCRATCH/limits-run.txt; sleep 0.5; done ) & RP=$!
judge $SCRATCH/limits-1.json
sleep 5   # the run's window that holds the last reads ends
kill $RP $R; wait $RP $R 2>/dev/null || true
# iocost configured on the device, then switched off: io.cost.qos keeps it.
echo "$MM enable=1" > $CG/io.cost.qos; echo "$MM enable=0" > $CG/io.cost.qos
judge $SCRATCH/limits-2.json
iocost_off $MM
"$IOWARDEN_BIN" limits /no-such-cgroup > $SCRATCH/limits-bad.out 2>&1; bad_rc=$?
python3 - $SCRATCH $LIN_DISK > $SCRATCH/limits-check 2>&1 <<'PY'
import json, sys
scratch, lin = sys.argv[1:3]
one, two = (json.load(open(f"{scratch}/limits-{i}.json")) for i in (1, 2))
def find(vs, cgroup, knob, device="nvme0n1"):
    m = [v for v in vs if v["cgroup"] == cgroup and v["knob"] == knob and v["device"] == device]
    return m[0] if m else {"state": None, "why": "(no verdict)"}
def check(name, v, state, words):
    good = v["state"] == state and all(w in v["why"] for w in words)
    print(("OK" if good else "BAD"), name, v["state"], "-", v["why"])
for v in one:
    print("  ", v["cgroup"], v["knob"], v["device"], v["value"], v["state"], "-", v["why"])
check("max-acting", find(one, "/lm-max", "io.max"), "acting", ["ms each"])
check("max-idle", find(one, "/lm-idle", "io.max"), "idle", ["none held"])
check("weight-no-policy", find(one, "/lm-w", "io.weight", lin), "not_in_effect", ["no weight-based policy", "iocost is off"])
check("weight-enable-0", find(two, "/lm-w", "io.weight"), "not_in_effect", ["enable=0"])
bfq = [v for v in one if v["cgroup"] == "/lm-bfq"]
check("bfq-not-scheduler", bfq[0] if bfq else {"state": None, "why": "(no io.bfq.weight: bfq not loadable)"}, "not_in_effect", ["not bfq"])
dm = [v for v in one if v["cgroup"] == "/lm-dm" and v["knob"] == "io.max"]
check("dm-elsewhere", dm[0] if dm else {"state": None, "why": "(no verdict)"}, "not_in_effect", ["went to nvme0n1"])
check("no-io-controller", find(one, "/lm-p/lm-c", "io", "*"), "not_in_effect", ["subtree_control"])
# What `run` exported while the same reads ran, window by window.
seen = set(open(f"{scratch}/limits-run.txt").read().splitlines()) if __import__("os").path.exists(f"{scratch}/limits-run.txt") else set()
want = [("/lm-max", "io.max", "nvme0n1", "acting", "held"),
        ("/lm-idle", "io.max", "nvme0n1", "idle", "none_held"),
        ("/lm-w", "io.weight", lin, "not_in_effect", "no_weight_policy"),
        ("/lm-dm", "io.max", lin, "not_in_effect", "io_elsewhere"),
        ("/lm-p/lm-c", "io", "*", "not_in_effect", "io_not_delegated")]
if bfq:
    want.append(("/lm-bfq", "io.bfq.weight", "nvme0n1", "not_in_effect", "not_bfq"))
missing = [w for w in want if not any(l.startswith('iowarden_limit_state{cgroup="%s",knob="%s",device="%s",' % w[:3])
                                      and ('state="%s",reason="%s"} 1' % w[3:]) in l for l in seen)]
print(("OK" if seen and not missing else "BAD"), "run-exports", len(seen), "distinct lines; missing:", missing)
PY
cat $SCRATCH/limits-check
ok "limits: io.max holding the reads is acting, with its hold" "grep -q '^OK max-acting' $SCRATCH/limits-check && grep -q '^OK max-idle' $SCRATCH/limits-check"
ok "limits: io.weight with iocost off and scheduler none is not in effect (no weight-based policy)" "grep -q '^OK weight-no-policy' $SCRATCH/limits-check"
ok "limits: io.weight with iocost configured but enable=0 says enable=0" "grep -q '^OK weight-enable-0' $SCRATCH/limits-check"
ok "limits: io.bfq.weight where the scheduler is not bfq is not in effect" "grep -q '^OK bfq-not-scheduler' $SCRATCH/limits-check"
ok "limits: a limit on a dm volume while the cgroup reads the disk beneath names where its I/O went" "grep -q '^OK dm-elsewhere' $SCRATCH/limits-check"
ok "limits: a cgroup whose parent does not delegate io is told to enable it" "grep -q '^OK no-io-controller' $SCRATCH/limits-check"
ok "limits: iowarden run exports each verdict as iowarden_limit_state{state, reason}" "grep -q '^OK run-exports' $SCRATCH/limits-check"
ok "limits: a cgroup that does not exist is refused with its name" "[ $bad_rc -ne 0 ] && grep -q \"no cgroup '/no-such-cgroup'\" $SCRATCH/limits-bad.out"
kill $S; wait $S 2>/dev/null
dmsetup remove --noudevsync iow-limlin

# Buffered writes through vfat escape a write limit on the disk beneath;
# through ext4 they are charged. 16 MiB written; judged while they are
# dirty (the kernel writes them back after 30 s), then sync(1): the flusher
# writes them back.
modprobe vfat 2>/dev/null
dmsetup create --noudevsync iow-vfat --table "0 131072 linear /dev/$DEV 3670016"
dmsetup create --noudevsync iow-ext4 --table "0 131072 linear /dev/$DEV 3801088"
VFAT_DISK=$(dm_disk iow-vfat); EXT4_DISK=$(dm_disk iow-ext4); EXT4=$(dev_mm "$EXT4_DISK")
mkfs.vfat /dev/mapper/iow-vfat > /dev/null; mkfs.ext4 -q -F /dev/mapper/iow-ext4
mkdir -p $SCRATCH/vfat $SCRATCH/ext4 $CG/lm-vfat $CG/lm-ext4
mount /dev/mapper/iow-vfat $SCRATCH/vfat; mount /dev/mapper/iow-ext4 $SCRATCH/ext4
echo "$MM wbps=1048576" > $CG/lm-vfat/io.max
echo "$EXT4 wbps=104857600" > $CG/lm-ext4/io.max
for fs in vfat ext4; do
  bash -c "echo \$\$ > $CG/lm-$fs/cgroup.procs; exec dd if=/dev/zero of=$SCRATCH/$fs/f bs=1M count=16 status=none"
done
grep -E '^file_(dirty|writeback) ' $CG/lm-vfat/memory.stat | tr '\n' ' ' | sed 's/^/  lm-vfat: /'; echo
"$IOWARDEN_BIN" limits --wait 1s --json > $SCRATCH/limits-3.json 2> $SCRATCH/limits-3.log
sync
cp $CG/lm-vfat/io.stat $SCRATCH/io.stat-vfat; cp $CG/lm-ext4/io.stat $SCRATCH/io.stat-ext4
umount $SCRATCH/vfat $SCRATCH/ext4

# Limits dropped with their device: iow-lost is re-created with another
# number (iow-fill takes its old one), iow-gone is removed.
lost_dev() { dmsetup create --noudevsync iow-$1 --table "0 16384 linear /dev/$DEV $2"; cat /sys/block/$(dm_disk iow-$1)/dev; }
mkdir -p $CG/lm-lost $CG/lm-gone
LOST=$(lost_dev lost 3932160); GONE=$(lost_dev gone 3948544)
echo "$LOST riops=300" > $CG/lm-lost/io.max; echo "$GONE wiops=300" > $CG/lm-gone/io.max
"$IOWARDEN_BIN" run --listen 127.0.0.1:9618 --interval 1s --limits-window 2s > $SCRATCH/limits-run2.log 2>&1 & R=$!
state() { curl -sf http://127.0.0.1:9618/metrics | grep "^iowarden_limit_state{cgroup=\"$1\"" > $SCRATCH/state-${1#/}; grep -q "$2" $SCRATCH/state-${1#/}; }
seen=0; for _ in $(seq 100); do state /lm-lost 'reason="no_io"' && state /lm-gone 'reason="no_io"' && { seen=1; break; }; sleep 0.2; done
dmsetup remove --noudevsync iow-lost; dmsetup remove --noudevsync iow-gone
dmsetup create --noudevsync iow-fill --table "0 16384 linear /dev/$DEV 3932160"
NEW=$(lost_dev lost 3932160); NEW_DISK=$(dm_disk iow-lost)
lost=0; for _ in $(seq 100); do state /lm-lost 'reason="device_recreated"' && state /lm-gone 'reason="no_device"' && { lost=1; break; }; sleep 0.2; done
kill $R; wait $R 2>/dev/null
sed "s/^/  /" $SCRATCH/state-lm-lost $SCRATCH/state-lm-gone; echo "  iow-lost: $LOST -> $NEW ($NEW_DISK); seen before: $seen"
python3 - $SCRATCH $VFAT_DISK $EXT4_DISK $MM $EXT4 > $SCRATCH/limits-check2 2>&1 <<'PY'
import json, sys
scratch, vfat_disk, ext4_disk, mm, ext4 = sys.argv[1:6]
def wbytes(fs, dev):
    for l in open(f"{scratch}/io.stat-{fs}"):
        if l.startswith(dev + " "):
            return int(l.split("wbytes=")[1].split()[0])
    return 0
vs = json.load(open(f"{scratch}/limits-3.json"))
def find(cgroup, device):
    m = [v for v in vs if v["cgroup"] == cgroup and v["knob"] == "io.max" and v["device"] == device]
    return m[0] if m else {"state": None, "reason": None, "why": "(no verdict)"}
v, e = find("/lm-vfat", "nvme0n1"), find("/lm-ext4", ext4_disk)
print("  vfat:", v, "charged", wbytes("vfat", mm), "B on nvme0n1")
print("  ext4:", e, "charged", wbytes("ext4", ext4), "B on", ext4_disk)
good = v["reason"] == "writeback_to_root" and "(vfat)" in v["why"] and wbytes("vfat", mm) < 1 << 20
print(("OK" if good else "BAD"), "vfat-escapes")
good = e["reason"] not in (None, "writeback_to_root") and wbytes("ext4", ext4) >= 16 << 20
print(("OK" if good else "BAD"), "ext4-charged")
PY
cat $SCRATCH/limits-check2
ok "limits: a write limit under a vfat mount, its cgroup's writes dirty, says they escape it to the root (io.stat: not charged)" "grep -q '^OK vfat-escapes' $SCRATCH/limits-check2"
ok "limits: the same write limit under ext4 is charged, and not said to escape" "grep -q '^OK ext4-charged' $SCRATCH/limits-check2"
ok "limits: run names a limit dropped with its re-created dm volume, on its new disk" "[ $seen = 1 ] && [ $lost = 1 ] && grep -q 'device=\"$NEW_DISK\".*reason=\"device_recreated\"' $SCRATCH/state-lm-lost"
ok "limits: run names a limit dropped with its removed dm volume" "[ $lost = 1 ] && grep -q 'device=\"iow-gone\".*reason=\"no_device\"' $SCRATCH/state-lm-gone"
dmsetup remove --noudevsync iow-lost; dmsetup remove --noudevsync iow-fill
dmsetup remove --noudevsync iow-vfat; dmsetup remove --noudevsync iow-ext4
rmdir $CG/lm-max $CG/lm-idle $CG/lm-w $CG/lm-bfq $CG/lm-dm $CG/lm-p/lm-c $CG/lm-p $CG/lm-vfat $CG/lm-ext4 $CG/lm-lost $CG/lm-gone 2>/dev/null || true
