# vmtest-checks: 4
# vmtest-beside: yes
# iowarden on cgroup v2 and NVMe: per-cgroup counts and bytes equal fio's
# and the kernel's own per-cgroup accounting (io.stat), and a cgroup's
# buffered writes, issued later by the flusher threads, are charged to it.
. "$(dirname "$0")/lib.sh"
if [ ! -x "$IOWARDEN_BIN" ]; then ok "iowarden binary at $IOWARDEN_BIN (run make build)" false; return 0 2>/dev/null || exit 0; fi
# memory too: writeback is charged through the cgroup's memcg.
echo "+io +memory" > $CG/cgroup.subtree_control
mkdir -p $CG/vt-a $CG/vt-b $CG/vt-w
"$IOWARDEN_BIN" run --listen 127.0.0.1:9617 --interval 1s --device $DEV > $SCRATCH/iowarden.log 2>&1 &
IW=$!
ready http://127.0.0.1:9617/snapshot.json
run_fio() { # cgroup rw bs qd ios offset
  bash -c "echo \$\$ > $CG/$1/cgroup.procs; exec fio --name=$1 --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=$2 --bs=$3 \
    --iodepth=$4 --number_ios=$5 --offset=$6 --size=512M --output-format=json --output=$SCRATCH/fio-$1.json"
}
run_fio vt-a randread 4k 4 3000 0 & A=$!
run_fio vt-b randwrite 64k 8 1000 1G & B=$!
wait $A $B
sleep 2
python3 - $CG $SCRATCH > $SCRATCH/check 2>&1 <<'PY'
import json, os, sys, urllib.request
cg, scratch = sys.argv[1:3]
snap = json.load(urllib.request.urlopen("http://127.0.0.1:9617/snapshot.json"))
for name, op in (("vt-a", "read"), ("vt-b", "write")):
    cid = os.stat(f"{cg}/{name}").st_ino
    job = json.load(open(f"{scratch}/fio-{name}.json"))["jobs"][0][op]
    s = [x for x in snap["io"] if x["cgroup"]["id"] == cid and x["op"] == op and x["device"]["name"] == "nvme0n1"]
    ios = sum(x["ios"] + x["merged"] for x in s); by = sum(x["bytes"] for x in s)
    path = s[0]["cgroup"]["path"] if s else "?"
    good = s and abs(ios - job["total_ios"]) <= 0.005 * job["total_ios"] and abs(by - job["io_bytes"]) <= 0.005 * job["io_bytes"] and path == f"/{name}"
    print(("OK" if good else "BAD"), name, path, "iowarden", ios, by, "fio", job["total_ios"], job["io_bytes"])
PY
cat $SCRATCH/check
ok "v2 cgroup vt-a: I/Os and bytes equal fio's" "grep -q '^OK vt-a' $SCRATCH/check"
ok "v2 cgroup vt-b: I/Os and bytes equal fio's" "grep -q '^OK vt-b' $SCRATCH/check"

# 32 MiB of buffered writes from vt-w, written back by the kernel's flusher
# threads (never vt-w's task) after sync: attributed through the bio.
bash -c "echo \$\$ > $CG/vt-w/cgroup.procs; exec dd if=/dev/zero of=/dev/$DEV bs=1M count=32 seek=1536 status=none"
sync
# The kernel's io.stat and iowarden's poll, until both hold the writeback
# (bounded: 30 s).
for _ in $(seq 150); do
  wb=$(sed -n "s/^$MM .*wbytes=\([0-9]*\).*/\1/p" $CG/vt-w/io.stat)
  [ "${wb:-0}" -ge 33554432 ] && break; sleep 0.2
done
python3 - $CG $MM > $SCRATCH/check-iostat 2>&1 <<'PY'
import json, os, sys, time, urllib.request
cg, mm = sys.argv[1:3]
def iostat(name):
    for line in open(f"{cg}/{name}/io.stat"):
        f = line.split()
        if f and f[0] == mm:
            return {k: int(v) for k, v in (x.split("=") for x in f[1:])}
    return {}
def ours(snap, name, op):
    cid = os.stat(f"{cg}/{name}").st_ino
    s = [x for x in snap["io"] if x["cgroup"]["id"] == cid and x["op"] == op and x["device"]["name"] == "nvme0n1"]
    return sum(x["ios"] + x["merged"] for x in s), sum(x["bytes"] for x in s)
want = iostat("vt-w").get("wbytes", 0)
for _ in range(150):   # the poll after the writeback completed
    snap = json.load(urllib.request.urlopen("http://127.0.0.1:9617/snapshot.json"))
    if ours(snap, "vt-w", "write")[1] >= want:
        break
    time.sleep(0.2)
near = lambda a, b: abs(a - b) <= 0.005 * max(b, 1)
for name, op, k in (("vt-a", "read", "r"), ("vt-b", "write", "w")):
    (ios, by), st = ours(snap, name, op), iostat(name)
    good = near(ios, st.get(k + "ios", 0)) and near(by, st.get(k + "bytes", 0))
    print(("OK" if good else "BAD"), "iostat", name, "iowarden", ios, by, "io.stat", st.get(k + "ios"), st.get(k + "bytes"))
ios, by = ours(snap, "vt-w", "write")
good = want >= 32 << 20 and near(by, want)
print(("OK" if good else "BAD"), "writeback vt-w", "iowarden", ios, by, "io.stat wbytes", want)
PY
cat $SCRATCH/check-iostat
ok "v2 cgroups: iowarden's I/Os and bytes equal io.stat's" "[ \$(grep -c '^OK iostat' $SCRATCH/check-iostat) -eq 2 ]"
ok "writeback of vt-w's buffered writes is charged to vt-w, as io.stat charges it" "grep -q '^OK writeback' $SCRATCH/check-iostat"
kill $IW; wait $IW 2>/dev/null || true   # killed: status 143
rmdir $CG/vt-a $CG/vt-b $CG/vt-w
