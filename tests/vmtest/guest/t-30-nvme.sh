# vmtest-checks: 11
# vmtest-kernels: 6.1 6.12
# NVMe programs: per-qid completions add up to the block layer's count;
# pinned fio lands on the qid of its CPU; head-of-line interference names
# the large-request cgroup sharing the victim's queue (after eight other
# cgroups sent large requests on it and went away), and vanishes when the
# victim moves to a CPU on another queue; each queue names the CPUs its
# hardware queue serves; the entries of removed cgroups are released; the
# commands match the block completions (status stays active), and a table
# too small to count them is reported (status 0 with the reason).
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/nv-a $CG/nv-vic $CG/nv-hog $(seq -f "$CG/nv-big%g" 8)
"$IOWARDEN_BIN" run --nvme --listen 127.0.0.1:9620 --interval 500ms --device $DEV > $SCRATCH/iowarden-nvme.log 2>&1 &
IW=$!
ready http://127.0.0.1:9620/snapshot.json
snap() { sleep 1.2; get http://127.0.0.1:9620/snapshot.json > $SCRATCH/nv-$1.json; }
# cgroup cpu fio-args...
in_cg() { local c=$1 cpu=$2; shift 2; bash -c "echo \$\$ > $CG/$c/cgroup.procs; exec taskset -c $cpu fio --filename=/dev/$DEV --direct=1 --ioengine=libaio --size=1G --output=/dev/null $*"; }

snap 0
in_cg nv-a 0 --name=a0 --rw=randread --bs=4k --iodepth=4 --number_ios=3000
snap 1
in_cg nv-a 1 --name=a1 --rw=randread --bs=4k --iodepth=4 --number_ios=3000
snap 2
# Eight cgroups send large requests on cpu 0's queue and go away: the hog
# after them must still find an entry among the queue's large-request owners.
for i in $(seq 8); do in_cg nv-big$i 0 --name=big$i --rw=randread --bs=256k --iodepth=4 --number_ios=32; done
snap big
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(" ".join(sorted({str(x["cgroup"]["id"]) for x in s["nvme_queue_cgroups"] if x["cgroup"]["path"].startswith("/nv-big")})))' $SCRATCH/nv-big.json > $SCRATCH/nv-big-ids
rmdir $(seq -f "$CG/nv-big%g" 8)
# Victim 4 KiB QD1 beside a 256 KiB QD32 hog on the same CPU (same queue),
# then on the other CPU (other queue). The hog runs until both victims are
# done, however long their start takes (in one CI run a loaded guest took
# so long that a hog of 20 s had ended under most of the first victim's
# reads: 59 of 769 behind it).
rm -f $SCRATCH/nv-hog.stop
in_cg nv-hog 0 --name=hog --rw=randread --bs=256k --iodepth=32 --time_based --runtime=600 --trigger-file=$SCRATCH/nv-hog.stop --aux-path=$SCRATCH & H=$!
# Start the victim once the hog's large requests flow (fio starts slowly here).
for _ in $(seq 100); do
  get http://127.0.0.1:9620/snapshot.json | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if sum(x["large_commands"] for x in s["nvme_queue_cgroups"] if x["cgroup"]["path"] == "/nv-hog") > 64 else 1)' && break
  sleep 0.3
done
in_cg nv-vic 0 --name=vic0 --rw=randread --bs=4k --iodepth=1 --time_based --runtime=5
snap 3
in_cg nv-vic 1 --name=vic1 --rw=randread --bs=4k --iodepth=1 --time_based --runtime=5
snap 4
stop_fio $SCRATCH/nv-hog.stop; wait $H
python3 - $SCRATCH /sys/block/$DEV/mq > $SCRATCH/nvme-check 2>&1 <<'PY'
import json, os, sys
scratch, mq = sys.argv[1:3]
S = [json.load(open(f"{scratch}/nv-{i}.json")) for i in range(5)]
def cpus(spec):
    out = set()
    for part in spec.strip().split(","):
        a, _, b = part.partition("-"); out.update(range(int(a), int(b or a) + 1))
    return out
qid_of_cpu = {c: int(h) + 1 for h in os.listdir(mq) for c in cpus(open(f"{mq}/{h}/cpu_list").read())}
def per_qid(s, cg=None):
    d = {}
    for x in s["nvme_queue_cgroups"]:
        if x["device"]["name"] == "nvme0n1" and (cg is None or x["cgroup"]["path"] == cg):
            d[x["qid"]] = d.get(x["qid"], 0) + x["completions"]
    return d
def block(s):
    return sum(x["ios"] for x in s["io"] if x["device"]["name"] == "nvme0n1")
# 1. per-qid completions sum to the block layer's completions
nv, bl = sum(per_qid(S[2]).values()), block(S[2])
print(("OK" if bl > 0 and abs(nv - bl) <= 0.005 * bl else "BAD"), "sum", f"per-qid completions {nv} vs block layer {bl} ({per_qid(S[2])})")
# 2. pinned fio lands on its CPU's qid
for i, cpu in ((1, 0), (2, 1)):
    a, b = per_qid(S[i - 1], "/nv-a"), per_qid(S[i], "/nv-a")
    d = {q: b[q] - a.get(q, 0) for q in b}
    want = qid_of_cpu[cpu]
    print(("OK" if d.get(want, 0) >= 0.99 * 3000 else "BAD"), f"pin{cpu}", f"cpu {cpu} -> qid {want}: completions per qid {d}")
# 3. HOL: victim on the hog's queue, then on another queue
def hol(s):
    h, clean = {}, 0
    for x in s["nvme_hol"]:
        if x["victim"]["path"] != "/nv-vic":
            continue
        if x["culprit"]:
            h[x["culprit"]["path"]] = h.get(x["culprit"]["path"], 0) + x["count"]
        else:
            clean += x["count"]
    return h, clean
(h2, c2), (h3, c3), (h4, c4) = hol(S[2]), hol(S[3]), hol(S[4])
same = h3.get("/nv-hog", 0) - h2.get("/nv-hog", 0); same_n = same + c3 - c2
other = h4.get("/nv-hog", 0) - h3.get("/nv-hog", 0); other_n = other + c4 - c3
# Where the hog's large commands went while the victims ran (a miss says).
for i in (2, 3, 4):
    print(f"  snap {i}: hog", [(x["qid"], x["commands"], x["large_commands"], x.get("inflight")) for x in S[i]["nvme_queue_cgroups"] if x["cgroup"]["path"] == "/nv-hog"])
print(("OK" if same_n > 0 and same >= 0.5 * same_n else "BAD"), "hol-same", f"same queue: {same} of {same_n} small requests behind /nv-hog; culprits {h3}")
print(("OK" if other_n > 0 and other <= 0.02 * other_n else "BAD"), "hol-other", f"other queue: {other} of {other_n} behind /nv-hog")
# 4. each I/O queue names the CPUs its blk-mq hardware queue serves
qs = [q for q in S[4]["nvme_queues"] if q["device"]["name"] == "nvme0n1" and q["qid"] >= 1]
bad = [(q["qid"], q["cpus"]) for q in qs if set(q["cpus"]) != cpus(open(f"{mq}/{q['qid'] - 1}/cpu_list").read())]
print(("OK" if qs and not bad else "BAD"), "qcpus", f"{len(qs)} queues; cpus differing from sysfs: {bad}")
ex = [x for x in S[3]["nvme_hol"] if x["victim"]["path"] == "/nv-vic"]
print("latency:", [(x["qid"], x["culprit"] and x["culprit"]["path"], x["count"], round(x["latency_sum_seconds"] / max(x["count"], 1) * 1e3, 3)) for x in ex])
PY
cat $SCRATCH/nvme-check
ok "nvme: per-qid completions = block-layer completions (±0.5%)" "grep -q '^OK sum' $SCRATCH/nvme-check"
ok "nvme: fio pinned to cpu 0 completes on cpu 0's qid" "grep -q '^OK pin0' $SCRATCH/nvme-check"
ok "nvme: fio pinned to cpu 1 completes on cpu 1's qid" "grep -q '^OK pin1' $SCRATCH/nvme-check"
ok "nvme HOL: victim sharing the hog's queue is counted behind /nv-hog" "grep -q '^OK hol-same' $SCRATCH/nvme-check"
ok "nvme HOL: victim on another queue is (almost) never behind /nv-hog" "grep -q '^OK hol-other' $SCRATCH/nvme-check"
ok "nvme: each queue names the CPUs its hardware queue serves (sysfs cpu_list)" "grep -q '^OK qcpus' $SCRATCH/nvme-check"
get http://127.0.0.1:9620/metrics > $SCRATCH/nvme-metrics
grep -E '^iowarden_(nvme_hol_events|nvme_hol_extra|hwq_cpu|nvme_sq_occupancy_max)' $SCRATCH/nvme-metrics | head -12
ok "nvme metrics exported (hol events, cpu map)" "grep -q '^iowarden_nvme_hol_events_total' $SCRATCH/nvme-metrics && grep -q '^iowarden_hwq_cpu' $SCRATCH/nvme-metrics"
python3 "$(dirname "$0")/promql.py" $SCRATCH 127.0.0.1:9620 "$(dirname "$0")/../../../dashboards/iowarden-nvme-queues.json" > $SCRATCH/promql-9620 2>&1
cat $SCRATCH/promql-9620
ok "dashboard iowarden-nvme-queues.json: every panel query returns data from a real Prometheus" "grep -q '^OK  *panel' $SCRATCH/promql-9620 && ! grep -q '^BAD' $SCRATCH/promql-9620"
# The removed cgroups' entries are released (at the second poll that finds
# them gone).
released() { get http://127.0.0.1:9620/snapshot.json | python3 -c 'import json,sys; s=json.load(sys.stdin); ids=set(open(sys.argv[1]).read().split()); left=[x for x in s["nvme_queue_cgroups"] if str(x["cgroup"]["id"]) in ids]; print(len(ids), "removed cgroups had entries;", len(left), "left"); sys.exit(0 if ids and not left else 1)' $SCRATCH/nv-big-ids; }
for _ in $(seq 60); do released > $SCRATCH/nv-released 2>&1 && break; sleep 0.5; done
cat $SCRATCH/nv-released
ok "nvme: the entries of 8 removed cgroups are released" "released"
probe_of() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print([p for p in s["probes"] if p["name"] == "nvme"])' "$1"; }
probe_of $SCRATCH/nv-4.json; grep -E 'nvme( inactive|: complete)' $SCRATCH/iowarden-nvme.log
ok "nvme: commands match the block completions (status active, no gap said)" \
  "[ \"\$(probe_of $SCRATCH/nv-4.json)\" = \"[{'name': 'nvme', 'active': True, 'reason': ''}]\" ] && ! grep -q 'nvme inactive' $SCRATCH/iowarden-nvme.log"
kill $IW; wait $IW 2>/dev/null || true   # killed: status 143
# A per-(queue, cgroup) table of one entry: the first queue's reads take
# it, the second's are dropped; the watch says so instead of exporting less.
IOWARDEN_NVME_TABLE_ENTRIES=1 "$IOWARDEN_BIN" run --nvme --listen 127.0.0.1:9621 --interval 500ms --device $DEV > $SCRATCH/iowarden-nvme-full.log 2>&1 &
IW=$!
ready http://127.0.0.1:9621/snapshot.json
in_cg nv-a 0 --name=f0 --rw=randread --bs=4k --iodepth=4 --number_ios=3000
in_cg nv-a 1 --name=f1 --rw=randread --bs=4k --iodepth=4 --number_ios=3000
gap() { get http://127.0.0.1:9621/snapshot.json | python3 -c 'import json,sys; s=json.load(sys.stdin); p=[p for p in s["probes"] if p["name"] == "nvme"]; print(p); sys.exit(0 if len(p) == 1 and not p[0]["active"] and "commands for" in p[0]["reason"] and "1 of 1 entries" in p[0]["reason"] else 1)'; }
for _ in $(seq 60); do gap > $SCRATCH/nv-gap 2>&1 && break; sleep 0.5; done
cat $SCRATCH/nv-gap; grep 'nvme inactive' $SCRATCH/iowarden-nvme-full.log
ok "nvme: a table too small for the commands is reported (status 0 with the reason, said in the log)" \
  "gap && grep -q 'nvme inactive: the nvme programs saw' $SCRATCH/iowarden-nvme-full.log"
kill $IW; wait $IW 2>/dev/null || true
rmdir $CG/nv-a $CG/nv-vic $CG/nv-hog
