# vmtest-checks: 2
# iowarden on cgroup v2 and NVMe: per-cgroup counts and bytes equal fio's.
. "$(dirname "$0")/lib.sh"
if [ ! -x "$IOWARDEN_BIN" ]; then ok "iowarden binary at $IOWARDEN_BIN (run make build)" false; return 0 2>/dev/null || exit 0; fi
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/vt-a $CG/vt-b
"$IOWARDEN_BIN" run --listen 127.0.0.1:9617 --interval 1s --device $DEV > $SCRATCH/iowarden.log 2>&1 &
IW=$!
for _ in $(seq 600); do python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:9617/snapshot.json")' 2>/dev/null && break; sleep 0.2; done
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
kill $IW; wait $IW 2>/dev/null || true   # killed: status 143
rmdir $CG/vt-a $CG/vt-b
