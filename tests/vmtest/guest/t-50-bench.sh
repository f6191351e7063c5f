# vmtest-checks: 6
# vmtest-kernels: 6.1
# vmtest-beside: yes
# iowarden bench --quick, fairness suite, no knob and io.cost + io.weight on
# the emulated NVMe device: the report exists and parses, iowarden's
# per-cgroup bandwidth equals fio's within 2 % (every tenant of every
# phase), io.cost's weighted Jain index is above no knob's, and qos, model,
# scheduler and cgroups are restored. The summary table is printed for the
# notes. One kernel line (CI's time, 45 s of bench a line): the report is
# the loader's logic over fio; what it rests on in each kernel is checked on
# every line, iowarden's per-cgroup bytes against fio by t-15, iocost's
# shares following the weights by t-35, and bench's own knob writes and
# their restore, interrupted, by t-51.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
OUT=$SCRATCH/bench
STATE=$SCRATCH/bench-state
rm -rf $OUT $STATE
bench_before
t0=$(date +%s)
"$IOWARDEN_BIN" bench --device $DEV --suite fairness --knobs none,io.cost --quick \
  --out $OUT --state-dir $STATE > $SCRATCH/bench.out 2> $SCRATCH/bench.err
rc=$?
echo "  bench: rc $rc in $(( $(date +%s) - t0 )) s"
tail -5 $SCRATCH/bench.err | sed 's/^/  /'
sed 's/^/  /' $OUT/summary.md 2>/dev/null
ok "bench: fairness --quick exits 0" "[ $rc -eq 0 ]"
python3 - $OUT > $SCRATCH/bench-check 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/report.json"))
print("OK" if r["schema"] == "iowarden-bench/1" and r["device"]["name"] == "nvme0n1" else "BAD", "parse",
      f"schema {r['schema']} device {r['device']} suites {r['suites']} knobs {r['knobs']} plots {r['plots']}")
bad = [c for c in r["cross_check"] if c["rel_diff"] is None or c["rel_diff"] > 0.02]
worst = max((c["rel_diff"] or 0 for c in r["cross_check"]), default=None)
print("OK" if r["cross_check"] and not bad else "BAD", "crosscheck",
      f"{len(r['cross_check'])} tenants, largest |iowarden - fio| / fio {worst}; over 2 %: {bad}")
for c in r["cross_check"]:
    print(f"   {c['phase']:<26} {c['tenant']:<4} iowarden {c['bw_bytes']/2**20:8.2f} MiB/s fio {c['fio_bw_bytes']/2**20:8.2f} MiB/s diff {100*(c['rel_diff'] or 0):.3f} %")
j = {f["knob"]: f for f in r["fairness"] if f["scenario"] == "weights"}
jn, jc = (j.get(k, {}).get("jain") for k in ("none", "io.cost"))
print("OK" if jn is not None and jc is not None and jc > jn else "BAD", "jain",
      f"weighted Jain 1:2:4:8: io.cost {jc} vs none {jn} (fio: {j.get('io.cost', {}).get('jain_fio')} vs {j.get('none', {}).get('jain_fio')})")
for f in r["fairness"]:
    print(f"   {f['scenario']:<8} {f['knob']:<8} window {f['window_seconds']:.1f}s J {f['jain']} J(fio) {f['jain_fio']}:",
          ", ".join(f"w{t['weight']} {t['bs']} {t['window_bw_bytes']/2**20:.1f}" for t in f["tenants"]))
v = {(x["knob"], x["desideratum"]): x["mark"] for x in r["verdicts"]}
print("OK" if ("io.cost", "D2") in v and ("none", "D2") in v else "BAD", "verdicts", v)
print("OK" if r["calibration"] and "model=linear" in r["calibration"]["io_cost_model"] else "BAD", "calibration", r["calibration"])
PY
cat $SCRATCH/bench-check
ok "bench: report.json parses (schema, device, verdicts, calibration)" "grep -q '^OK parse' $SCRATCH/bench-check && grep -q '^OK verdicts' $SCRATCH/bench-check && grep -q '^OK calibration' $SCRATCH/bench-check"
ok "bench: iowarden's per-cgroup bandwidth equals fio's within 2 %" "grep -q '^OK crosscheck' $SCRATCH/bench-check"
ok "bench: io.cost's weighted Jain index is above no knob's" "grep -q '^OK jain' $SCRATCH/bench-check"
ok "bench: summary and plots written" "grep -q '^| io.cost |' $OUT/summary.md && grep -q '<svg' $OUT/fairness.svg"
ok "bench: qos, model, scheduler restored, cgroups removed, nothing left in the journal" "{ bench_restored || { echo \"  after: \$(bench_state)\"; false; }; } && [ -z \"\$(ls $STATE 2>/dev/null)\" ]"

