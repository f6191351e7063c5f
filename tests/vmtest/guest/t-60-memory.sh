# vmtest-checks: 4
# vmtest-append: possible_cpus=192
# vmtest-kernels: 6.1 5.10
# Kernel memory at a fleet host's CPU count: this guest boots with 192
# possible CPUs (2 online), so per-CPU maps would be allocated 192 times.
# Not on 6.12: since 6.9's CPU topology code possible_cpus= only limits
# the count ("Limiting to 192 possible CPUs", possible stays 0-1), and the
# 190 absent CPUs of QEMU's -smp 2,maxcpus=192 are not counted as
# hotpluggable either ("2 present CPUs plus 0 hotplug CPUs").
# iowarden run with defaults must hold >= 4096 series in <= 32 MiB of BPF
# map memory, summed over every map it loads (bytes_memlock).
. "$(dirname "$0")/lib.sh"
ok "the kernel has 192 possible CPUs" "[ \"\$(cat /sys/devices/system/cpu/possible)\" = 0-191 ]"
"$IOWARDEN_BIN" run --listen 127.0.0.1:9619 --interval 500ms > $SCRATCH/iowarden-mem.log 2>&1 &
pid=$!
for _ in $(seq 100); do
  python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:9619/snapshot.json")' 2>/dev/null && break
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
python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9619/metrics").read().decode())' > $SCRATCH/mem-metrics
grep 'iowarden_map_capacity{map="series"}' $SCRATCH/mem-metrics
ok "default capacity >= 4096 series" "awk '/^iowarden_map_capacity\\{map=\"series\"\\}/ { exit !(\$2 >= 4096) }' $SCRATCH/mem-metrics"
ok "the I/O was counted" "grep -q '^iowarden_io_requests_total{.*device=\"$DEV\"' $SCRATCH/mem-metrics"
kill $pid; wait $pid 2>/dev/null || true
