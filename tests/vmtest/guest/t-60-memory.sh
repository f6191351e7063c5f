# vmtest-checks: 5
# vmtest-append: possible_cpus=192
# vmtest-kernels: 6.1 5.10
# vmtest-beside: yes
# Kernel memory at a fleet host's CPU count: this guest boots with 192
# possible CPUs (2 online), so per-CPU maps would be allocated 192 times.
# Not on 6.12: since 6.9's CPU topology code possible_cpus= only limits
# the count ("Limiting to 192 possible CPUs", possible stays 0-1), and the
# 190 absent CPUs of QEMU's -smp 2,maxcpus=192 are not counted as
# hotpluggable either ("2 present CPUs plus 0 hotplug CPUs").
# iowarden run with defaults must hold >= 4096 series in <= 32 MiB of BPF
# map memory, summed over every map it loads (bytes_memlock). With
# --culprits (issue 37) its tables must not be per-CPU and the whole stay
# within the same 32 MiB; where the kernel refuses it (5.10: no BPF
# compare-and-swap) the probe must say so.
. "$(dirname "$0")/lib.sh"
ok "the kernel has 192 possible CPUs" "[ \"\$(cat /sys/devices/system/cpu/possible)\" = 0-191 ]"
"$IOWARDEN_BIN" run --listen 127.0.0.1:9619 --interval 500ms > $SCRATCH/iowarden-mem.log 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -sf -o /dev/null http://127.0.0.1:9619/snapshot.json && break
  sleep 0.2
done
fio --name=mem --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=8 \
  --time_based --runtime=2 --size=256M --output=/dev/null
sleep 1
# The guest runs no other BPF: every map is iowarden's (the I/O and iocost
# objects; the nvme object loads only with --nvme).
bpftool map show -j > $SCRATCH/maps.json
python3 - $SCRATCH/maps.json > $SCRATCH/mem 2>&1 <<'PY'
import json, sys
maps = json.load(open(sys.argv[1]))
total = sum(m.get("bytes_memlock", 0) for m in maps)
for m in sorted(maps, key=lambda m: -m.get("bytes_memlock", 0))[:8]:
    print(f"  {m.get('name','?'):20s} {m.get('type','?'):14s} {m.get('bytes_memlock',0)/2**20:8.2f} MiB")
print(f"TOTAL {total} bytes = {total/2**20:.2f} MiB in {len(maps)} maps")
PY
cat $SCRATCH/mem
total=$(sed -n 's/^TOTAL \([0-9]*\) .*/\1/p' $SCRATCH/mem)
ok "BPF map memory <= 32 MiB with 192 possible CPUs" "[ -n \"$total\" ] && [ $total -le 33554432 ]"
get http://127.0.0.1:9619/metrics > $SCRATCH/mem-metrics
grep 'iowarden_map_capacity{map="series"}' $SCRATCH/mem-metrics
ok "default capacity >= 4096 series" "awk '/^iowarden_map_capacity\\{map=\"series\"\\}/ { exit !(\$2 >= 4096) }' $SCRATCH/mem-metrics"
ok "the I/O was counted" "grep -q '^iowarden_io_requests_total{.*device=\"$DEV\"' $SCRATCH/mem-metrics"
kill $pid; wait $pid 2>/dev/null || true

# --culprits: its tables (flight, flight_tags, flight_stale, queued,
# culprit_ns) at their full size.
"$IOWARDEN_BIN" run --culprits --listen 127.0.0.1:9618 --interval 500ms > $SCRATCH/iowarden-mem-culprits.log 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:9618/snapshot.json > /dev/null && break; sleep 0.2; done
fio --name=mem --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=8 \
  --time_based --runtime=2 --size=256M --output=/dev/null
bpftool map show -j > $SCRATCH/maps-culprits.json
curl -sf http://127.0.0.1:9618/metrics > $SCRATCH/mem-culprits-metrics
kill $pid; wait $pid 2>/dev/null || true
python3 - $SCRATCH/maps-culprits.json $SCRATCH/mem-culprits-metrics > $SCRATCH/mem-culprits 2>&1 <<'PY'
import json, re, sys
maps = json.load(open(sys.argv[1]))
metrics = open(sys.argv[2]).read()
total = sum(m.get("bytes_memlock", 0) for m in maps)
ours = [m for m in maps if m.get("name") in ("flight", "flight_tags", "flight_stale", "queued", "culprit_ns")]
for m in ours:
    print(f"  {m['name']:20s} {m.get('type','?'):14s} {m.get('bytes_memlock',0)/2**10:8.1f} KiB {m.get('max_entries')} entries")
mib = sum(m.get("bytes_memlock", 0) for m in ours) / 2**20
percpu = [m["name"] for m in ours if "percpu" in m.get("type", "")]
active = re.search(r'^iowarden_probe_active\{probe="culprits",reason="([^"]*)"\} (\S+)', metrics, re.M)
print(f"  probe culprits: {active.groups() if active else 'not exported'}")
print(f"  --culprits: {len(ours)} tables, {mib:.2f} MiB of {total/2**20:.2f} MiB in {len(maps)} maps; per-CPU: {percpu}")
full = active and float(active.group(2)) == 1 and len(ours) == 5 and not percpu and total <= 32 * 2**20
refused = active and float(active.group(2)) == 0 and "compare-and-swap" in active.group(1) and total <= 32 * 2**20
print("OK" if full or refused else "BAD")
PY
cat $SCRATCH/mem-culprits
ok "--culprits with 192 possible CPUs: its tables are not per-CPU and all maps stay within 32 MiB (or the kernel's refusal is named)" "tail -1 $SCRATCH/mem-culprits | grep -qx OK"
