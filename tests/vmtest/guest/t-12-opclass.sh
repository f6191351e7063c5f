# vmtest-checks: 3
# vmtest-beside: yes
# Op classes follow the kernel's accounting (op_stat_group): write-zeroes is a
# write, as in /sys/block/<dev>/stat; only REQ_OP_DISCARD is a discard.
. "$(dirname "$0")/lib.sh"
if [ ! -x "$IOWARDEN_BIN" ]; then ok "iowarden binary at $IOWARDEN_BIN (run make build)" false; return 0 2>/dev/null || exit 0; fi
ok "$DEV takes write-zeroes (write_zeroes_max_bytes > 0)" \
  "[ \$(cat /sys/block/$DEV/queue/write_zeroes_max_bytes) -gt 0 ]"
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/vt-zero
"$IOWARDEN_BIN" run --listen 127.0.0.1:9617 --interval 500ms --device $DEV > $SCRATCH/iowarden.log 2>&1 &
IW=$!
ready http://127.0.0.1:9617/snapshot.json
cp /sys/block/$DEV/stat $SCRATCH/stat0
# 64 MiB of REQ_OP_WRITE_ZEROES (BLKZEROOUT; -z without the fallback to writing zeroes).
bash -c "echo \$\$ > $CG/vt-zero/cgroup.procs; exec blkdiscard -z -o 1G -l 64M /dev/$DEV"
cp /sys/block/$DEV/stat $SCRATCH/stat1
python3 - $CG $SCRATCH $DEV > $SCRATCH/check 2>&1 <<'PY'
import json, os, sys, time, urllib.request
cg, scratch, dev = sys.argv[1:4]
cid = os.stat(f"{cg}/vt-zero").st_ino
s0, s1 = ([int(x) for x in open(f"{scratch}/{f}").read().split()] for f in ("stat0", "stat1"))
d = [b - a for a, b in zip(s0, s1)]
# /sys/block stat: writes ios 4 merges 5 sectors 6; discards ios 11 merges 12 sectors 13.
kernel = {"write": (d[4] + d[5], d[6] * 512), "discard": (d[11] + d[12], d[13] * 512)}
print("kernel (/sys/block stat):", kernel)
print("KERNEL-WROTE" if kernel["write"][1] >= 64 << 20 else "KERNEL-SHORT")
for _ in range(40):  # bounded: 20 s for the daemon's polls to take it in
    snap = json.load(urllib.request.urlopen("http://127.0.0.1:9617/snapshot.json"))
    ours = {op: (sum(x["ios"] + x["merged"] for x in snap["io"] if x["cgroup"]["id"] == cid and x["op"] == op and x["device"]["name"] == dev),
                 sum(x["bytes"] for x in snap["io"] if x["cgroup"]["id"] == cid and x["op"] == op and x["device"]["name"] == dev))
            for op in kernel}
    if ours == kernel:
        break
    time.sleep(0.5)
print("iowarden:", ours)
print("OK" if ours == kernel else "BAD")
PY
cat $SCRATCH/check
ok "blkdiscard -z shows in the kernel's write counts (>= 64 MiB)" "grep -q '^KERNEL-WROTE' $SCRATCH/check"
ok "iowarden's write and discard requests and bytes equal /sys/block stat's" "grep -q '^OK' $SCRATCH/check"
kill $IW; wait $IW 2>/dev/null || true
rmdir $CG/vt-zero
