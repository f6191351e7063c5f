# vmtest-checks: 7
# vmtest-beside: yes
# Bio-based devices: device-mapper and md take bios, not requests, so the
# block_rq_* tracepoints never fire on them; block_bio_complete does. On
# dm-linear, dm-crypt, an LVM logical volume and md raid1, all on the
# guest's NVMe, a cgroup per volume does 4 KiB random reads and writes
# (direct); under `iowarden run`'s defaults, started before the volumes
# exist (block_bio_complete attaches when the first appears), each
# cgroup's requests and bytes on each device io.stat charges it on (the
# volume, the volumes below it, nvme0n1) equal io.stat's, short only by the
# completions the kernel skipped and reported as recursion misses and, in
# the count on nvme0n1, by the bios the kernel merged into a request there
# (io.stat counts bios, iowarden requests; /sys/block/nvme0n1/stat counts
# the merges), and
# a QD1 reader's latency on dm-linear equals fio's (mean, within 10 % or
# 0.5 ms); /metrics names each volume with its dm name and the disks below.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/bb-lin $CG/bb-crypt $CG/bb-lv $CG/bb-md $CG/bb-q
"$IOWARDEN_BIN" run --listen 127.0.0.1:9617 --interval 1s > $SCRATCH/iowarden-bio.log 2>&1 &
IW=$!
ready http://127.0.0.1:9617/snapshot.json
modprobe dm-mod; modprobe dm-crypt; modprobe raid1
N=/dev/$DEV
# 64 MiB volumes in the device's second GiB (sectors of 512 bytes). The
# NVMe image outlives the guest: a previous line's run left md and LVM
# superblocks there, and a guest that assembles md on sight (udev's
# incremental rule) would hold the legs before mdadm --create: each
# volume's first MiB is zeroed first.
for s in 2097152 2228224 2359296 2490368 2621440; do
  dd if=/dev/zero of=$N bs=1M count=1 seek=$((s / 2048)) oflag=direct conv=notrunc status=none
done
lin() { dmsetup create --noudevsync "$1" --table "0 131072 linear $N $2"; }
# Whatever a check does, the volumes go: a leg left held keeps nvme0n1 busy
# and the next scripts (bench refuses a held device) would fail for it.
teardown() {
  kill $IW 2>/dev/null
  [ -e /dev/md/iowmd ] && mdadm --stop /dev/md/iowmd > /dev/null 2>&1
  lvm vgchange -q --config "$LVM_CONF" -an iowvg > /dev/null 2>&1
  for v in iow-crypt iow-lin iow-pv iow-m1 iow-m2; do
    [ -e /dev/mapper/$v ] && { dmsetup remove --noudevsync $v || dmsetup remove --noudevsync --retry $v; }
  done
  rmdir $CG/bb-lin $CG/bb-crypt $CG/bb-lv $CG/bb-md $CG/bb-q 2>/dev/null
  return 0
}
trap teardown EXIT
lin iow-lin 2097152
dmsetup create --noudevsync iow-crypt --table "0 131072 crypt aes-xts-plain64 $(printf '%064d' 7) 0 $N 2228224"
lin iow-pv 2359296
lin iow-m1 2490368
lin iow-m2 2621440
LVM_CONF='devices { obtain_device_list_from_udev=0 } activation { udev_sync=0 udev_rules=0 } backup { backup=0 archive=0 }'
export LVM_SYSTEM_DIR=$SCRATCH/lvm; mkdir -p $LVM_SYSTEM_DIR
lvm pvcreate -q --config "$LVM_CONF" /dev/mapper/iow-pv > $SCRATCH/lvm.log 2>&1
lvm vgcreate -q --config "$LVM_CONF" iowvg /dev/mapper/iow-pv >> $SCRATCH/lvm.log 2>&1
lvm lvcreate -q --config "$LVM_CONF" -Zn -y -L 48M -n lv iowvg >> $SCRATCH/lvm.log 2>&1
[ -e /dev/mapper/iowvg-lv ] || lvm vgmknodes --config "$LVM_CONF" >> $SCRATCH/lvm.log 2>&1
mdadm --create /dev/md/iowmd --run --quiet --level=1 --raid-devices=2 --metadata=1.2 --bitmap=none --assume-clean \
  /dev/mapper/iow-m1 /dev/mapper/iow-m2 > $SCRATCH/md.log 2>&1 || sed 's/^/  mdadm: /' $SCRATCH/md.log
MD=$(basename "$(readlink -f /dev/md/iowmd 2>/dev/null)")
[ -n "$MD" ] && [ -e /sys/block/$MD/md ] || MD=no-md   # the md checks fail on their own, the rest still run
echo "  volumes: $(ls /dev/mapper | grep iow | tr '\n' ' ')md $MD"
sleep 2   # a poll that sees them
job() { # cgroup device rw ios
  bash -c "echo \$\$ > $CG/$1/cgroup.procs; exec fio --name=$1 --filename=$2 --direct=1 --ioengine=libaio --rw=$3 --bs=4k \
    --iodepth=4 --number_ios=$4 --size=32M --output=/dev/null"
}
read -r _ RMERGE0 _ _ _ WMERGE0 _ < /sys/block/$DEV/stat
for pair in "bb-lin /dev/mapper/iow-lin" "bb-crypt /dev/mapper/iow-crypt" "bb-lv /dev/mapper/iowvg-lv" "bb-md /dev/$MD"; do
  set -- $pair
  [ -b "$2" ] || continue
  job $1 $2 randread 2048; job $1 $2 randwrite 512
done
bash -c "echo \$\$ > $CG/bb-q/cgroup.procs; exec fio --name=bb-q --filename=/dev/mapper/iow-lin --direct=1 --ioengine=psync --rw=randread \
  --bs=4k --number_ios=500 --size=32M --output-format=json --output=$SCRATCH/fio-bb-q.json"
sleep 2.5
get http://127.0.0.1:9617/snapshot.json > $SCRATCH/bb-snap.json
get http://127.0.0.1:9617/metrics > $SCRATCH/bb-metrics.txt
for c in bb-lin bb-crypt bb-lv bb-md bb-q; do cp $CG/$c/io.stat $SCRATCH/iostat-$c; done
read -r _ RMERGE1 _ _ _ WMERGE1 _ < /sys/block/$DEV/stat
kill $IW; wait $IW 2>/dev/null || true   # killed: status 143
python3 - $CG $SCRATCH $MD $(dm_disk iow-lin) $((RMERGE1 - RMERGE0)) $((WMERGE1 - WMERGE0)) > $SCRATCH/bio-check 2>&1 <<'PY'
import json, os, sys
cg, scratch, md, lin = sys.argv[1:5]
# A bio the kernel merges into a request already on its way (a plug's
# back merge: dm-crypt's writer thread submits sorted batches) is a bio in
# io.stat and no request of its own, so no completion: on a request-based
# disk a cgroup's count is short by at most the disk's merges (every
# cgroup's) over the run; its bytes are not.
merges = {"read": int(sys.argv[5]), "write": int(sys.argv[6])}
print("  merges on the disk during the run:", merges)
snap = json.load(open(f"{scratch}/bb-snap.json"))
names = {}
for d in os.listdir("/sys/block"):
    names[open(f"/sys/block/{d}/dev").read().strip()] = d
def ours(cid, mm, op):
    ma, mi = map(int, mm.split(":"))
    s = [x for x in snap["io"] if x["cgroup"]["id"] == cid and x["op"] == op and (x["device"]["major"], x["device"]["minor"]) == (ma, mi)]
    return sum(x["ios"] + x["merged"] for x in s), sum(x["bytes"] for x in s)
# The kernel runs no program nested inside itself on one CPU: a completion
# in an interrupt that lands while the same program runs for one in task
# context (dm-crypt completes bios from its workers) is skipped and counted
# as the program's recursion miss. Counts are exact but for those.
misses = {}
for line in open(f"{scratch}/bb-metrics.txt"):
    if line.startswith("iowarden_bpf_program_recursion_misses_total{"):
        prog = line.split('program="')[1].split('"')[0].removesuffix("_nocas")
        misses[prog] = misses.get(prog, 0) + int(float(line.split()[-1]))
print("  recursion misses:", {p: n for p, n in misses.items() if n},
      "drops:", [l.strip() for l in open(f"{scratch}/bb-metrics.txt") if l.startswith("iowarden_dropped_total")])
def near(ours, theirs, dev, size=1, op=None):
    bio_based = dev.startswith(("dm-", "md"))
    miss = misses.get("block_bio_complete" if bio_based else "block_rq_complete", 0)
    merged = merges[op] if op and not bio_based else 0
    return theirs - miss * size - merged <= ours <= theirs
for c, vol in (("bb-lin", "iow-lin"), ("bb-crypt", "iow-crypt"), ("bb-lv", "iowvg-lv"), ("bb-md", md)):
    cid = os.stat(f"{cg}/{c}").st_ino
    good, devs = True, []
    for line in open(f"{scratch}/iostat-{c}"):
        f = line.split(); st = {k: int(v) for k, v in (x.split("=") for x in f[1:] if "=" in x)}
        if not (st.get("rios") or st.get("wios")):
            continue
        r, w = ours(cid, f[0], "read"), ours(cid, f[0], "write")
        dev = names.get(f[0], f[0])
        ok = (near(r[0], st["rios"], dev, op="read") and near(w[0], st["wios"], dev, op="write")
              and near(r[1], st["rbytes"], dev, 4096) and near(w[1], st["wbytes"], dev, 4096))
        good &= ok
        devs.append(names.get(f[0], f[0]))
        print(f"  {c} on {names.get(f[0], f[0])}: iowarden reads {r[0]} ({r[1]} B) writes {w[0]} ({w[1]} B); io.stat rios {st['rios']} ({st['rbytes']} B) wios {st['wios']} ({st['wbytes']} B){'' if ok else '  <-- differs'}")
        if not ok:  # where the difference went: every series on that device
            for x in snap["io"]:
                if x["device"]["name"] == dev:
                    print(f"    {dev} {x['cgroup']} {x['op']}: {x['ios'] + x['merged']} ({x['bytes']} B)")
    bio_based = [d for d in devs if d.startswith(("dm-", "md"))]
    print(("OK" if good and bio_based and "nvme0n1" in devs else "BAD"), "counts", c, vol, devs)
cid = os.stat(f"{cg}/bb-q").st_ino
lat = json.load(open(f"{scratch}/fio-bb-q.json"))["jobs"][0]["read"]["lat_ns"]["mean"] / 1e9
s = [x for x in snap["io"] if x["cgroup"]["id"] == cid and x["op"] == "read" and x["device"]["name"] == lin]
t = s[0]["latency"]["total"] if s else {"counts": [], "sum_seconds": 0}
n = sum(t["counts"]); mean = t["sum_seconds"] / max(n, 1)
good = n == 500 and abs(mean - lat) <= max(0.1 * lat, 0.0005)
print(("OK" if good else "BAD"), "latency", f"bb-q on {lin}: {n} reads timed, mean {mean * 1e3:.3f} ms; fio {lat * 1e3:.3f} ms")
PY
cat $SCRATCH/bio-check
grep 'block_bio_complete' $SCRATCH/iowarden-bio.log | sed 's/^/  log: /'
ok "bio-based: dm-linear: per-cgroup counts and bytes equal io.stat's on the volume and nvme0n1" "grep -q '^OK counts bb-lin' $SCRATCH/bio-check"
ok "bio-based: dm-crypt: per-cgroup counts and bytes equal io.stat's on the volume and nvme0n1" "grep -q '^OK counts bb-crypt' $SCRATCH/bio-check"
ok "bio-based: LVM LV: per-cgroup counts and bytes equal io.stat's on the LV, its PV and nvme0n1" "grep -q '^OK counts bb-lv' $SCRATCH/bio-check"
ok "bio-based: md raid1: per-cgroup counts and bytes equal io.stat's on md, its legs and nvme0n1" "grep -q '^OK counts bb-md' $SCRATCH/bio-check"
ok "bio-based: a QD1 reader's latency on dm-linear equals fio's (mean)" "grep -q '^OK latency' $SCRATCH/bio-check"
LV=$(dm_disk iowvg-lv); PV=$(dm_disk iow-pv); M1=$(dm_disk iow-m1)
grep '^iowarden_volume_lower_info' $SCRATCH/bb-metrics.txt | sed 's/^/  /'
ok "bio-based: /metrics names the LV (its dm name, its PV below) and md (a leg below)" \
  "grep -q 'iowarden_volume_lower_info{device=\"$LV\",kind=\"dm\",name=\"iowvg-lv\",lower=\"$PV\"} 1.0' $SCRATCH/bb-metrics.txt && grep -q 'iowarden_volume_lower_info{device=\"$MD\",kind=\"md\",name=\"$MD\",lower=\"$M1\"} 1.0' $SCRATCH/bb-metrics.txt"
ok "bio-based: block_bio_complete attached when the first volume appeared" "grep -q 'attached block_bio_complete' $SCRATCH/iowarden-bio.log"
