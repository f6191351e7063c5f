#!/bin/bash
# Runs inside the guest: every t-*.sh beside this file; ends with "N passed, N failed".
here=$(dirname "$(readlink -f "$0")")
export SCRATCH=/run/iowarden-vmtest; mkdir -p $SCRATCH
export PASSED=$SCRATCH/passed FAILED=$SCRATCH/failed; : > $PASSED; : > $FAILED
[ -e /sys/block/nvme0n1 ] || modprobe nvme 2>/dev/null
for _ in $(seq 100); do [ -e /sys/block/nvme0n1 ] && break; sleep 0.1; done
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
echo "guest: $(uname -r), $(nproc) CPUs, uptime $(cut -d' ' -f1 /proc/uptime) s"
for t in "$here"/t-${VMTEST_ONLY:-*}.sh; do echo "guest: $(basename "$t")"; bash "$t"; done
p=$(wc -l < $PASSED); f=$(wc -l < $FAILED)
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
