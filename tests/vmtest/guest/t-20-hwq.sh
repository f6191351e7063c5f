# vmtest-checks: 2
# vmtest-beside: yes
# Per-hardware-queue counters on a multi-queue device: fio pinned to each
# vCPU shows its I/O on the hctx whose cpu_list holds that CPU.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
"$IOWARDEN_BIN" run --listen 127.0.0.1:9618 --interval 500ms --device $DEV > $SCRATCH/iowarden-hwq.log 2>&1 &
IW=$!
ready http://127.0.0.1:9618/snapshot.json
snap() { get http://127.0.0.1:9618/snapshot.json > $1; }
for cpu in 0 1; do
  snap $SCRATCH/hwq-before-$cpu.json
  taskset -c $cpu fio --name=pin$cpu --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k \
    --iodepth=4 --number_ios=2000 --size=512M --output=/dev/null
  sleep 1.2
  snap $SCRATCH/hwq-after-$cpu.json
  python3 - $cpu $SCRATCH /sys/block/$DEV/mq > $SCRATCH/hwq-$cpu 2>&1 <<'PY'
import json, os, sys
cpu, scratch, mq = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def cpus(spec):
    out = set()
    for part in spec.strip().split(","):
        a, _, b = part.partition("-"); out.update(range(int(a), int(b or a) + 1))
    return out
want = [int(h) for h in os.listdir(mq) if cpu in cpus(open(f"{mq}/{h}/cpu_list").read())]
def completed(f):
    return {q["hctx"]: q["completed"] for q in json.load(open(f))["queues"] if q["device"]["name"] == "nvme0n1"}
b, a = completed(f"{scratch}/hwq-before-{cpu}.json"), completed(f"{scratch}/hwq-after-{cpu}.json")
d = {h: a[h] - b.get(h, 0) for h in a}
on_want = sum(v for h, v in d.items() if h in want)
print(("OK" if want and on_want >= 0.99 * 2000 and sum(d.values()) - on_want <= 0.01 * 2000 else "BAD"),
      f"cpu {cpu} -> hctx {want}: completed per hctx {d}")
PY
  cat $SCRATCH/hwq-$cpu
  ok "fio on cpu $cpu issues on the hctx mapped to cpu $cpu" "grep -q '^OK' $SCRATCH/hwq-$cpu"
done
kill $IW; wait $IW 2>/dev/null || true   # killed: status 143
