#!/bin/bash
# What --culprits costs per request on a loop device (docs/culprits.md):
# rounds of iowarden's block programs without and with it, and of
# biolatency (libbpf-tools, the peer), each under the same fio load (4 KiB
# random reads at QD16 beside a QD1 reader, 8 s): the kernel's bpf_stats
# per program (run time over runs) and their sum per completed request. As
# root, from the repository, after `make build`. SCHED names an I/O
# scheduler for the loop device (none, mq-deadline, bfq; under one,
# --culprits splits the queue stage too); unset, whatever the loop device
# has (a loop device keeps the scheduler set last). The first line says
# which.
# Usage: [SCHED=none] overhead/culprits-cost.sh [ROUNDS]
set -euo pipefail
BIN=${IOWARDEN_BIN:-target/release/iowarden}
ROUNDS=${1:-3}
SCHED=${SCHED:-}
IMG=$(mktemp /var/tmp/iowarden-culprits-cost-XXXXXX.img)
OUT=$(mktemp)
dd if=/dev/urandom of="$IMG" bs=1M count=1024 status=none
LOOP=$(losetup -f --show --direct-io=on "$IMG")
was=$(sysctl -n kernel.bpf_stats_enabled)
trap 'losetup -d "$LOOP"; rm -f "$IMG" "$OUT" "$OUT.progs"; sysctl -qw kernel.bpf_stats_enabled=$was' EXIT
[ -z "$SCHED" ] || echo "$SCHED" > "/sys/block/$(basename "$LOOP")/queue/scheduler"
echo "# scheduler: $(cat "/sys/block/$(basename "$LOOP")/queue/scheduler")"
sysctl -qw kernel.bpf_stats_enabled=1
for round in $(seq "$ROUNDS"); do
  for mode in default culprits biolatency; do
    case $mode in
      default) "$BIN" snapshot --device "$(basename "$LOOP")" --wait 12s > /dev/null 2>&1 & IW=$! ;;
      culprits) "$BIN" snapshot --device "$(basename "$LOOP")" --culprits --wait 12s > /dev/null 2>&1 & IW=$! ;;
      biolatency) timeout 12 /usr/sbin/biolatency -d "$(basename "$LOOP")" > /dev/null 2>&1 & IW=$! ;;
    esac
    sleep 2
    fio --name=load --filename="$LOOP" --direct=1 --ioengine=libaio --runtime=8 --time_based --size=512M \
      --rw=randread --bs=4k --iodepth=16 --output-format=json --output="$OUT" &
    fio --name=victim --filename="$LOOP" --direct=1 --runtime=8 --time_based --offset=512M --size=256M \
      --rw=randread --bs=4k --output=/dev/null &
    wait %2 %3
    # While iowarden's programs are still attached: their bpf_stats.
    bpftool -j prog show > "$OUT.progs"
    python3 - "$OUT.progs" $mode "$round" <<'PY'
import json, sys
path, mode, rnd = sys.argv[1:4]
# biolatency's programs are named <tracepoint>_btf where tp_btf attaches.
progs = {p["name"].removesuffix("_btf"): p for p in json.load(open(path)) if p.get("run_cnt")}
names = [n for n in ("block_rq_complete", "block_rq_issue", "block_rq_insert") if n in progs]
parts = ["%s %.0f ns/run" % (n, progs[n]["run_time_ns"] / progs[n]["run_cnt"]) for n in names]
per_rq = sum(progs[n]["run_time_ns"] for n in names) / progs["block_rq_complete"]["run_cnt"]
print("%s round %s: %s | %.0f ns per request" % (mode, rnd, ", ".join(parts), per_rq))
PY
    wait $IW || true
  done
done
