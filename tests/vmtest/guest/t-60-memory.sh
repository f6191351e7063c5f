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
# map memory, summed over every map it loads (bytes_memlock), the culprit
# account included (on by default, issue 53): its log is a ring of records
# per possible CPU, 1.5 MiB in all at this count (2.25 MiB as 6.1 counts
# an array's bytes_memlock: keys included), and its probe is active on
# every kernel line (it needs no compare-and-swap).
. "$(dirname "$0")/lib.sh"
ok "the kernel has 192 possible CPUs" "[ \"\$(cat /sys/devices/system/cpu/possible)\" = 0-191 ]"
"$IOWARDEN_BIN" run --listen 127.0.0.1:9619 --interval 500ms > $SCRATCH/iowarden-mem.log 2>&1 &
pid=$!
ready http://127.0.0.1:9619/snapshot.json "$pid"
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
python3 - $SCRATCH/maps.json $SCRATCH/mem-metrics > $SCRATCH/mem-culprits 2>&1 <<'PY'
import json, re, sys
maps = json.load(open(sys.argv[1]))
metrics = open(sys.argv[2]).read()
log = [m for m in maps if m.get("name") in ("flight_log", "flight_heads")]
for m in log:
    print(f"  {m['name']:20s} {m.get('type','?'):14s} {m.get('bytes_memlock',0)/2**10:8.1f} KiB {m.get('max_entries')} entries")
mib = sum(m.get("bytes_memlock", 0) for m in log) / 2**20
active = re.search(r'^iowarden_probe_active\{probe="culprits",reason="([^"]*)"\} (\S+)', metrics, re.M)
service = re.search(r'^iowarden_culprit_seconds_total\{device="[^"]*",victim="[^"]*",op="read",stage="device",culprit="none"', metrics, re.M)
print(f"  probe culprits: {active.groups() if active else 'not exported'}; its log {mib:.2f} MiB; a reader's service exported: {bool(service)}")
print("OK" if active and float(active.group(2)) == 1 and len(log) == 2 and mib <= 2.5 and service else "BAD")
PY
cat $SCRATCH/mem-culprits
ok "the culprit account is on by default with 192 possible CPUs: its log within 2.5 MiB, the reads' service exported" "tail -1 $SCRATCH/mem-culprits | grep -qx OK"
kill $pid; wait $pid 2>/dev/null || true
