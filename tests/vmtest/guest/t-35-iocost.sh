# vmtest-checks: 12
# iocost programs: with iocost on the NVMe device (a model whose capacity is
# below what the emulated device delivers, vrate pinned at 100%) two cgroups
# of io.weight 100 and 500 running the same saturating job: iowarden's
# hweight_active matches the configured share, the cgroups' I/O shares follow
# the weights within 20%, and its vrate equals io.stat's cost.vrate; the
# fields the events carry read as the kernel holds them (the iocost status
# stays active); the cost charged follows io.cost.model written while
# iowarden runs. A removed cgroup's records are released. Everything
# changed is restored.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
echo +io > $CG/cgroup.subtree_control
orig_qos=$(qos)
orig_model=$(model)
echo "  before: qos '${orig_qos}' model '${orig_model}'"
mkdir -p $CG/ic-a $CG/ic-b
echo "default 100" > $CG/ic-a/io.weight
echo "default 500" > $CG/ic-b/io.weight
"$IOWARDEN_BIN" run --listen 127.0.0.1:9621 --interval 500ms --device $DEV > $SCRATCH/iowarden-iocost.log 2>&1 &
IW=$!
ready http://127.0.0.1:9621/snapshot.json
# The device is read and priced before its model is written: iowarden
# follows io.cost.model as iocost charges it (tune --model rewrites it
# while iowarden runs), which the cost check below compares.
dd if=/dev/$DEV of=/dev/null bs=4k count=256 iflag=direct status=none; sleep 1.5
echo "$MM ctrl=user model=linear rbps=209715200 rseqiops=500 rrandiops=500 wbps=209715200 wseqiops=500 wrandiops=500" > $CG/io.cost.model
echo "$MM enable=1 ctrl=user rpct=95 rlat=20000 wpct=95 wlat=20000 min=100 max=100" > $CG/io.cost.qos
echo "  iocost: $(qos)"
snap() { get http://127.0.0.1:9621/snapshot.json > $SCRATCH/ic-$1.json; }
job() { bash -c "echo \$\$ > $CG/$1/cgroup.procs; exec fio --name=$1 --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=32 --size=1G --time_based --runtime=16 --output=/dev/null"; }
# top from the start, as a user would: it sees the cgroups activate.
"$IOWARDEN_BIN" top --device $DEV --interval 1s --duration 9s > $SCRATCH/ic-top.txt 2>&1 &
sleep 3
job ic-a & A=$!
job ic-b & B=$!
sleep 4; snap 0
for i in 1 2 3 4 5 6; do sleep 1; grep "^$MM" $CG/io.stat | grep -o 'cost.vrate=[0-9.]*'; done
snap 1
cp $CG/io.stat $SCRATCH/ic-io.stat
wait $A $B
sleep 1.5; snap 2
grep -E '^(iocost|  /ic-)' $SCRATCH/ic-top.txt | tail -3
# A top started in steady state (no iocost events) still shows the device.
"$IOWARDEN_BIN" top --device $DEV --interval 1s --duration 1500ms > $SCRATCH/ic-top2.txt 2>&1 || true
ok "iocost: top started in steady state shows the device from its files" "grep -q '^iocost nvme0n1: vrate 100.0% \[100%..100%\]' $SCRATCH/ic-top2.txt"
grep -q '^iocost nvme0n1: vrate 100.0% \[100%..100%\]' $SCRATCH/ic-top2.txt || sed 's/^/  top: /' $SCRATCH/ic-top2.txt | head -20
ok "iocost: top shows the iocost panel" "grep -q '^iocost nvme0n1: vrate' $SCRATCH/ic-top.txt && grep -q '/ic-b .*weight *500' $SCRATCH/ic-top.txt"
python3 - $SCRATCH > $SCRATCH/iocost-check 2>&1 <<'PY'
import json, sys
scratch = sys.argv[1]
s0, s1 = (json.load(open(f"{scratch}/ic-{i}.json")) for i in (0, 1))
def ios(s, cg):
    return sum(x["ios"] for x in s["io"] if x["device"]["name"] == "nvme0n1" and x["cgroup"]["path"] == cg)
a = ios(s1, "/ic-a") - ios(s0, "/ic-a"); b = ios(s1, "/ic-b") - ios(s0, "/ic-b")
share_b = b / max(a + b, 1)
print(("OK" if a + b > 0 and abs(share_b - 5 / 6) <= 0.2 * 5 / 6 and abs((1 - share_b) - 1 / 6) <= 0.2 * 1 / 6 else "BAD"), "share",
      f"I/O in the window: ic-a {a}, ic-b {b}: ic-b share {share_b:.3f} (weights say {5/6:.3f}); IOPS {(a + b) / 6:.0f}")
# hweights while both jobs run (s0, 4 s in; by s1 the jobs may be ending).
cg = {x["cgroup"]["path"]: x for x in s0["iocost_cgroups"] if x["device"]["name"] == "nvme0n1"}
ha, hb = cg.get("/ic-a", {}).get("hweight_active_ratio", 0), cg.get("/ic-b", {}).get("hweight_active_ratio", 0)
print(("OK" if abs(ha - 1 / 6) <= 0.2 / 6 and abs(hb - 5 / 6) <= 0.2 * 5 / 6 else "BAD"), "hweight",
      f"hweight_active ic-a {ha:.4f} ic-b {hb:.4f} (configured 1/6, 5/6; kernel's cached {cg.get('/ic-a', {}).get('hweight_active_cached_ratio')}, {cg.get('/ic-b', {}).get('hweight_active_cached_ratio')}); weights {cg.get('/ic-a', {}).get('weight')} {cg.get('/ic-b', {}).get('weight')}")
d = [x for x in s1["iocost_devices"] if x["device"]["name"] == "nvme0n1"]
v, vs = (d[0]["vrate_ratio"], d[0]["io_stat_vrate_ratio"]) if d else (None, None)
print(("OK" if d and vs is not None and abs(v - vs) <= 0.0001 + 0.005 * vs else "BAD"), "vrate",
      f"iowarden vrate {v} (effective {d and d[0]['vrate_effective_ratio']}) vs io.stat cost.vrate {vs}; qos {d and d[0]['qos']}; min/max {d and (d[0]['qos_vrate_min_ratio'], d[0]['qos_vrate_max_ratio'])}")
# iowarden charges the model of io.cost.model as the kernel does: with
# rseqiops = rrandiops every 4 KiB read costs the same, so each cgroup's
# charged cost equals the kernel's own (io.stat cost.usage at vrate 100%).
s2 = json.load(open(f"{scratch}/ic-2.json"))
cm = [m for m in s2.get("cost_models", []) if m["device"]["name"] == "nvme0n1"]
cg2 = {x["cgroup"]["path"]: x for x in s2["iocost_cgroups"] if x["device"]["name"] == "nvme0n1"}
good = bool(cm) and cm[0]["source"] == "io.cost.model" and cm[0]["configured"]["rrandiops"] == 500
for p in ("/ic-a", "/ic-b"):
    mine = sum(x["cost_seconds"] for x in s2["io"] if x["device"]["name"] == "nvme0n1" and x["cgroup"]["path"] == p)
    kern = cg2.get(p, {}).get("usage_seconds") or 0
    good = good and kern > 0 and abs(mine - kern) <= 0.01 * kern
    print("  cost", p, f"iowarden {mine:.4f} s, kernel cost.usage {kern:.4f} s")
print(("OK" if good else "BAD"), "cost", f"model {cm and (cm[0]['source'], cm[0]['configured'])}; fitted {cm and cm[0]['fitted_line']}")
for p in ("/ic-a", "/ic-b"):
    x = cg.get(p, {})
    print("  ", p, {k: x.get(k) for k in ("active", "hweight_active_cached_ratio", "inuse", "hweight_inuse_ratio", "debt_seconds", "delay_seconds", "activations", "idles", "usage_seconds")})
PY
cat $SCRATCH/iocost-check
ok "iocost: hweight_active matches the configured 100:500 share" "grep -q '^OK hweight' $SCRATCH/iocost-check"
ok "iocost: I/O shares follow the weights within 20%" "grep -q '^OK share' $SCRATCH/iocost-check"
ok "iocost: iowarden's vrate equals io.stat cost.vrate" "grep -q '^OK vrate' $SCRATCH/iocost-check"
ok "cost: io.cost.model, written after iowarden priced the device, charged per cgroup equals the kernel's cost.usage within 1%" "grep -q '^OK cost' $SCRATCH/iocost-check"
get http://127.0.0.1:9621/metrics > $SCRATCH/iocost-metrics
grep -E '^iowarden_iocost_(vrate_ratio|hweight_active|weight|usage)' $SCRATCH/iocost-metrics | head
ok "iocost metrics exported" "grep -q '^iowarden_iocost_hweight_active_ratio' $SCRATCH/iocost-metrics && grep -q '^iowarden_iocost_vrate_ratio' $SCRATCH/iocost-metrics"
python3 "$(dirname "$0")/promql.py" $SCRATCH 127.0.0.1:9621 "$(dirname "$0")/../../../dashboards/iowarden-iocost.json" > $SCRATCH/promql-9621 2>&1
cat $SCRATCH/promql-9621
ok "dashboard iowarden-iocost.json: every panel query returns data from a real Prometheus" "grep -q '^OK  *panel' $SCRATCH/promql-9621 && ! grep -q '^BAD' $SCRATCH/promql-9621"
# Never silently wrong: the cgroups' events were read (activations, weights)
# and iowarden found no field reading 0 (its iocost status keeps the reason
# it started with, e.g. a tracepoint the kernel lacks).
iocost_sound() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); p=[p for p in s["probes"] if p["name"] == "iocost"]; c={x["cgroup"]["path"]: x for x in s["iocost_cgroups"]}; print(p, {k: (c[k]["activations"], c[k]["weight"]) for k in c}); sys.exit(0 if len(p) == 1 and p[0]["active"] and "iocost events" not in p[0]["reason"] and all(c.get(k, {}).get("activations", 0) > 0 for k in ("/ic-a", "/ic-b")) else 1)' $SCRATCH/ic-2.json; }
iocost_sound
ok "iocost: the events' fields read as the kernel holds them (status active, no gap said)" "iocost_sound && ! grep -q 'iocost inactive' $SCRATCH/iowarden-iocost.log"
# A removed cgroup's iocost records are released after two polls gone (a
# host with short-lived cgroups must not fill the table), the others kept.
ic_a=$(stat -c %i $CG/ic-a); rmdir $CG/ic-a
released=0
for _ in $(seq 50); do
  snap 3
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["iocost_cgroups"]; sys.exit(0 if not any(x["cgroup"]["id"] == int(sys.argv[2]) for x in c) and any(x["cgroup"]["path"] == "/ic-b" for x in c) else 1)' $SCRATCH/ic-3.json $ic_a && { released=1; break; }
  sleep 0.2
done
ok "iocost: a removed cgroup's records are released from the table and the snapshot (ic-b's stay)" "[ $released = 1 ]"
kill $IW; wait $IW 2>/dev/null || true   # killed: status 143

# Restore: iocost off and automatic parameters again (or the lines we found).
echo "$MM enable=0" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.model
rmdir $CG/ic-a $CG/ic-b 2>/dev/null
now_qos=$(qos)
now_model=$(model)
echo "  after: qos '${now_qos}' model '${now_model}'"
# The kernel keeps a device's line once iocost was configured on it: with no
# line before, "restored" means disabled and back to automatic parameters.
if [ -z "$orig_qos" ]; then
  ok "iocost: qos and model restored (off, automatic)" "echo \"\$now_qos\" | grep -q 'enable=0 ctrl=auto' && echo \"\$now_model\" | grep -q 'ctrl=auto'"
else
  ok "iocost: qos and model restored" "[ \"\$now_qos\" = \"\$orig_qos\" ] && [ \"\$now_model\" = \"\$orig_model\" ]"
fi
ok "iocost: test cgroups removed" "[ ! -e $CG/ic-a ] && [ ! -e $CG/ic-b ]"
