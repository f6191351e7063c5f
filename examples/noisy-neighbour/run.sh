#!/bin/bash
# Noisy neighbour on a loop device: a victim (4 KiB random reads, QD1) runs
# alone, then a hog (128 KiB writes, QD32) joins in another cgroup.
# `iowarden top` shows it live and ends by naming the noisy neighbour.
# Everything it creates (loop device, cgroups, files, processes) is removed on
# exit, Ctrl-C and a closed terminal (SIGHUP) included. fio's own output (progress, results, errors) goes to
# FIO_LOG so the terminal shows only iowarden.
# Env: DURATION (s, default 24), IOWARDEN (binary), FIO_LOG (default /var/tmp/iowarden-demo-fio.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
IOWARDEN=${IOWARDEN:-target/release/iowarden}
DURATION=${DURATION:-24}
FIO_LOG=${FIO_LOG:-/var/tmp/iowarden-demo-fio.log}
[[ $(id -u) -eq 0 ]] || { echo "run as root: the demo creates a loop device and cgroups" >&2; exit 1; }
[[ -x $IOWARDEN ]] || { echo "build first: make build" >&2; exit 1; }

# The hierarchy the io controller is bound to: v1 blkio on hybrid hosts, else cgroup2.
if grep -qE '^\S+ /sys/fs/cgroup/blkio cgroup .*blkio' /proc/mounts; then
  CG=/sys/fs/cgroup/blkio
else
  CG=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  echo +io > "$CG/cgroup.subtree_control" 2>/dev/null || true
fi
BASE=$CG/iowarden-demo
IMG=$(mktemp /var/tmp/iowarden-demo.XXXXXX.img)
LOOP=""
PIDS=()

cleanup() {
  trap - EXIT INT TERM HUP
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n $LOOP ]] && losetup -d "$LOOP" 2>/dev/null || true
  rm -f "$IMG"
  for d in "$BASE/victim" "$BASE/hog" "$BASE"; do
    for _ in $(seq 50); do [[ -d $d ]] || break; rmdir "$d" 2>/dev/null && break; sleep 0.1; done
  done
  # The terminal may be gone (SIGHUP): a failed echo is no failure.
  echo "demo: cleaned up (loop device, cgroups, files)" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'exit 129' HUP

truncate -s 2G "$IMG"
LOOP=$(losetup -f --show --direct-io=on "$IMG")
mkdir -p "$BASE/victim" "$BASE/hog"
echo "demo: $LOOP, cgroups $BASE/{victim,hog}; victim alone first, hog joins after 6 s; fio's output in $FIO_LOG"
: > "$FIO_LOG"

# exec: a job started with `in_cgroup ... &` is then fio itself, which
# cleanup's kill reaches (a terminal's Ctrl-C reaches it anyway; SIGHUP not).
in_cgroup() { local cg=$1; shift; exec sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
in_cgroup "$BASE/victim" fio --name=victim --filename="$LOOP" --direct=1 --ioengine=libaio --rw=randread \
  --bs=4k --iodepth=1 --size=1G --time_based --runtime=$((DURATION + 2)) --eta=never >> "$FIO_LOG" 2>&1 &
PIDS+=($!)
( sleep 6; exec sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$BASE/hog" fio --name=hog --filename="$LOOP" \
  --direct=1 --ioengine=libaio --rw=randwrite --bs=128k --iodepth=32 --offset=1G --size=1G --time_based \
  --runtime=$((DURATION - 4)) --eta=never ) >> "$FIO_LOG" 2>&1 &
PIDS+=($!)

"$IOWARDEN" top --device "$LOOP" --interval 2s --duration "${DURATION}s"
