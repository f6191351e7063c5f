# Assertions for guest tests: ok NAME CONDITION (a shell expression).
ok() {
  if eval "$2"; then echo "PASS: $1"; echo "$1" >> "$PASSED"; else echo "FAIL: $1"; echo "$1" >> "$FAILED"; fi
}
CG=/sys/fs/cgroup
# get URL: the body of an HTTP GET; ready URL [PID]: wait until URL answers
# (up to 120 s; given PID, the daemon serving it, no longer than it lives).
# curl, not Python: under TCG a urllib import costs ~1 s (curl 0.3), and
# the scripts fetch a snapshot dozens of times.
get() { curl -sf --max-time 30 "$1"; }
ready() {
  local _i
  for _i in $(seq 600); do
    curl -sf -o /dev/null --max-time 5 "$1" && return 0
    [ -z "${2:-}" ] || kill -0 "$2" 2>/dev/null || { echo "  $1: process $2 exited before answering" >&2; return 1; }
    sleep 0.2
  done
  echo "  $1 did not answer within 120 s" >&2; return 1
}
# The test device and its MAJ:MIN (dev_mm NAME: any block device's, as
# /sys/block/NAME/dev holds it).
dev_mm() { cat "/sys/block/$1/dev"; }
DEV=nvme0n1
MM=$(dev_mm "$DEV" 2>/dev/null)
# A best-effort hog in $CG/md-hog: the fio patterns given after the time
# ("rw bs qd"; by default the script's $SIX) in turn, 4 s each, on the
# device's second GiB, for $1 s or until stop_hog (which waits for the fio
# running to finish). $T holds its stop file.
cycle() {
  local until=$(( $(date +%s) + $1 )) pats
  shift; pats=("$@"); [ $# -gt 0 ] || pats=("${SIX[@]}")
  rm -f $T/stop
  echo $BASHPID > $CG/md-hog/cgroup.procs
  while [ $(date +%s) -lt $until ] && [ ! -e $T/stop ]; do
    for p in "${pats[@]}"; do
      set -- $p
      fio --name=hog --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=$1 --bs=$2 --iodepth=$3 \
        --offset=1G --size=512M --time_based --runtime=4 > /dev/null 2>&1
      [ -e $T/stop ] && break
    done
  done
}
stop_hog() { touch $T/stop; wait $1 2>/dev/null; }
# A fio started with --trigger-file=FILE --aux-path=DIR ends early, reporting
# as at its runtime, once FILE exists (its main process polls for it; the
# saved state it writes lands in DIR). Not SIGINT: `pkill -f` also reaches
# the job's own process (in a session of its own, setsid), whose handler
# formats and writes its note (malloc, stdio) in whatever the job was doing.
# In 1 of 6 t-45 runs and one CI run, so stopped, the LC job (whose latency
# log allocates as it grows) never ended: its main process polled for it
# long past its runtime. stop_fio FILE...: create the trigger files.
stop_fio() { touch "$@"; }
# The drive's QEMU cap $1 (iops-total, bps-read, iops-write, ...), as
# run.sh gave it; empty where the drive has none.
cap() { sed -n "s/.*throttling\\.$1=\\([0-9]*\\).*/\\1/p" <<< "${VMTEST_DRIVE:-}"; }
# The m-56 measurements' device and cgroups: the reader's (io.weight 1000)
# and the hog's, nomerges 2 (the old value in $nomerges), and the device
# charged as its total caps (CAP_IOPS, CAP_BPS: 500/s and 16 MiB/s where
# the drive has none) in io.cost.model.
caps_setup() {
  echo +io > $CG/cgroup.subtree_control
  mkdir -p $CG/md-lc $CG/md-hog
  echo "default 1000" > $CG/md-lc/io.weight
  nomerges=$(cat /sys/block/$DEV/queue/nomerges); echo 2 > /sys/block/$DEV/queue/nomerges
  CAP_IOPS=$(cap iops-total); CAP_BPS=$(cap bps-total)
  CAP_IOPS=${CAP_IOPS:-500}; CAP_BPS=${CAP_BPS:-16777216}
  echo "$MM ctrl=user model=linear rbps=$CAP_BPS rseqiops=$CAP_IOPS rrandiops=$CAP_IOPS wbps=$CAP_BPS wseqiops=$CAP_IOPS wrandiops=$CAP_IOPS" > $CG/io.cost.model
}
# Undoes caps_setup: iocost off, the model automatic, nomerges back, the
# cgroups gone.
caps_cleanup() {
  echo "$MM enable=0" > $CG/io.cost.qos; echo "$MM ctrl=auto" > $CG/io.cost.model
  echo $nomerges > /sys/block/$DEV/queue/nomerges
  rmdir $CG/md-lc $CG/md-hog 2>/dev/null
}
# The io.cost.qos and io.cost.model lines of the script's device $MM.
qos() { grep "^$MM " $CG/io.cost.qos || true; }
model() { grep "^$MM " $CG/io.cost.model || true; }
# qos_wait MAJ:MIN PATTERN SECONDS [CONDITION]: wait until the device's
# io.cost.qos line matches PATTERN (after MAJ:MIN, anywhere in the line)
# and CONDITION (a shell expression, as ok takes) holds; 0.1 s polls.
qos_wait() {
  local _i
  for _i in $(seq "$(( $3 * 10 ))"); do
    grep -q "^$1 .*$2" "$CG/io.cost.qos" && eval "${4:-true}" && return 0
    sleep 0.1
  done
  return 1
}
# iocost's vrate (%) on device MAJ:MIN, as the root's io.stat prints it.
vrate() { grep "^$1 " $CG/io.stat | sed -n 's/.* cost\.vrate=\([0-9.]*\).*/\1/p'; }
# pin_vrate MAJ:MIN V: vrate pinned at V % the way `iowarden tune` pins it
# (loader/src/knobs/vrate_pin.rs): 1 µs latency targets, which every
# completion misses, until io.stat shows V (I/O must be flowing; up to 5 s),
# then the device's own targets back with min = max = V.
pin_vrate() {
  local mm=$1 v=$2 line r w
  line=$(grep "^$mm " $CG/io.cost.qos)
  r=$(echo "$line" | sed -n 's/.* rlat=\([0-9]*\).*/\1/p')
  w=$(echo "$line" | sed -n 's/.* wlat=\([0-9]*\).*/\1/p')
  echo "$mm enable=1 ctrl=user rpct=100 rlat=1 wpct=100 wlat=1 min=$v max=$v" > $CG/io.cost.qos
  for _ in $(seq 500); do
    [ "$(vrate $mm)" = "$(printf %.2f $v)" ] && break
    sleep 0.01
  done
  echo "$mm enable=1 ctrl=user rpct=100 rlat=$r wpct=100 wlat=$w min=$v max=$v" > $CG/io.cost.qos
}
# iocost off on device MAJ:MIN with automatic parameters, as t-35 restores
# it (the kernel keeps a device's lines once iocost was configured on it).
iocost_off() {
  echo "$1 enable=0" > $CG/io.cost.qos
  echo "$1 ctrl=auto" > $CG/io.cost.qos
  echo "$1 ctrl=auto" > $CG/io.cost.model
}
# The disk (dm-N) of device-mapper device NAME: /dev/mapper/NAME is a node
# of its own, not a link, where no udev runs.
dm_disk() {
  local d
  for d in /sys/block/dm-*; do [ "$(cat $d/dm/name 2>/dev/null)" = "$1" ] && basename $d; done
  return 0
}
# What `iowarden bench` must leave as it found: the device's qos, model and
# scheduler and no bench cgroups (t-50, t-51; $MM, $DEV, and bench_before
# set before the bench).
bench_state() { echo "qos '$(qos)' model '$(model)' sched '$(cat /sys/block/$DEV/queue/scheduler)' cgroups '$(ls -d $CG/iowarden-bench-* 2>/dev/null)'"; }
bench_before() { before_qos=$(qos); before_sched=$(cat /sys/block/$DEV/queue/scheduler); before=$(bench_state); echo "  before: $before"; }
# The kernel keeps a device's qos/model line once iocost was configured on
# it; with no line before, restored means disabled with automatic parameters.
bench_restored() {
  local now; now=$(bench_state)
  [ "$now" = "$before" ] && return 0
  [ -z "$(grep "^$MM " <<<"$before_qos")" ] && echo "$now" | grep -q "qos '$MM enable=0 ctrl=auto" \
    && echo "$now" | grep -q "ctrl=auto model=linear" && echo "$now" | grep -q "cgroups ''$" \
    && [ "$(cat /sys/block/$DEV/queue/scheduler)" = "$before_sched" ]
}
# swap_on NAME: swap on 256 MiB of $DEV from 1.5 GiB through dm-linear NAME
# (no udev: the node by hand); SWAP_DISK is its disk (dm-N).
swap_on() {
  dmsetup create --noudevsync "$1" --table "0 524288 linear /dev/$DEV 3145728"
  SWAP_DISK=$(dm_disk "$1")
  [ -e /dev/$SWAP_DISK ] || mknod /dev/$SWAP_DISK b $(dev_mm "$SWAP_DISK" | tr : " ")
  mkswap /dev/$SWAP_DISK >/dev/null && swapon /dev/$SWAP_DISK
}
# swap_off NAME: the swap_on's undone. The device can stay busy for a moment
# after swapoff (CI once saw EBUSY): retry, so that no later script finds
# $DEV held by it.
swap_off() {
  swapoff /dev/$SWAP_DISK
  for _ in $(seq 50); do dmsetup remove --retry "$1" 2>/dev/null && break; sleep 0.2; done
  dmsetup info "$1" >/dev/null 2>&1 && echo "  $1 still there after 50 tries" >&2
  return 0
}
# swapper CGROUP SECONDS: a task of CGROUP walks 96 MiB of memory, 256
# pages at a time, for SECONDS (it swaps where memory.max is below that),
# and says how far it got.
swapper() {
  bash -c "echo \$\$ > $CG/$1/cgroup.procs; exec python3 -c '
import time
b = bytearray(96 << 20)
t, pages = time.time(), 0
while time.time() - t < $2:
    for i in range(pages % 24576 * 4096, min(len(b), (pages % 24576 + 256) * 4096), 4096):
        b[i] = (b[i] + 1) & 255
    pages += 256
print(\"  swapper: touched %d pages of 96 MiB in %.1f s\" % (pages, time.time() - t))
'"
}
