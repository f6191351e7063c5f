#!/bin/bash
# Runs inside the guest: every t-${VMTEST_ONLY}.sh beside this file; ends with
# "N passed, N failed, N expected". Each script declares on its first line
# how many checks it reports ("# vmtest-checks: N"); a script that reports
# fewer or more, exits non-zero, or a selection that matches no script is a
# failure of its own (a FAIL line), so a run cannot be green without its checks.
here=$(dirname "$(readlink -f "$0")")
export SCRATCH=${SCRATCH:-/run/iowarden-vmtest}; mkdir -p $SCRATCH
export PASSED=$SCRATCH/passed FAILED=$SCRATCH/failed; : > $PASSED; : > $FAILED
if [ -z "${VMTEST_NO_SETUP:-}" ]; then
  [ -e /sys/block/nvme0n1 ] || modprobe nvme 2>/dev/null
  for _ in $(seq 100); do [ -e /sys/block/nvme0n1 ] && break; sleep 0.1; done
  mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
  echo "guest: $(uname -r), $(nproc) CPUs, uptime $(cut -d' ' -f1 /proc/uptime) s"
fi
fail() { echo "FAIL: $1"; echo "$1" >> $FAILED; }
reported() { cat $PASSED $FAILED | wc -l; }
# A script still running after its limit (LIMIT s, or the N of a
# "# vmtest-limit: N" line among its lines 2-5) is stopped whole, after
# printing where it waits: its processes, every task in D state, their
# kernel stacks, the kernel's last lines. A hang then fails by name and the
# guest goes on, where it used up the guest's whole timeout with no word of
# why (a 6.1 guest in CI on 2026-12-06, in t-45's tuned phase, which takes
# at most ~5 minutes).
LIMIT=600
set -m   # each script in a process group of its own, to stop it whole
overdue() {  # pid name limit
  local pid=$1 p tasks
  : > $SCRATCH/overdue-$pid
  fail "$2: still running after $3 s: stopped (where it waited follows)"
  echo "  $2 overdue: its processes (pid stat wchan elapsed command), then tasks in D state:"
  tasks=$(ps -e -o pid=,pgid=,stat=,wchan:28=,etimes=,args= | awk -v g=$pid '$2 == g || $3 ~ /^D/')
  cut -c1-200 <<< "$tasks" | head -30 | sed 's/^/  | /'
  for p in $(awk '{ print $1 }' <<< "$tasks" | head -12); do
    echo "  | stack of $p ($(cat /proc/$p/comm 2>/dev/null)): $(head -8 /proc/$p/stack 2>/dev/null | awk '{ print $2 }' | tr '\n' ' ')"
  done
  dmesg 2>/dev/null | tail -12 | sed 's/^/  | kernel: /'
  kill -TERM -- -$pid 2>/dev/null; sleep 5; kill -KILL -- -$pid 2>/dev/null
}
run_limited() {  # script: its exit status
  local t=$1 name limit pid dog rc
  name=$(basename "$t")
  limit=$(sed -n '2,5s/^# vmtest-limit: \([0-9][0-9]*\)$/\1/p' "$t"); limit=${limit:-$LIMIT}
  if [ -n "${VMTEST_TRACE:-}" ]; then  # run.sh's VMTEST_TRACE: a host directory
    mkdir -p "$VMTEST_TRACE"
    # (root's bash takes no PS4 from the environment)
    BASH_XTRACEFD=9 bash -c 'PS4="+ \$EPOCHREALTIME \$BASHPID "; set -x; . "$0"' "$t" 9> "$VMTEST_TRACE/$name.trace" < /dev/null &
  else
    bash "$t" < /dev/null &
  fi
  pid=$!
  ( sleep "$limit"; overdue $pid "$name" "$limit" ) & dog=$!
  wait $pid; rc=$?
  # Once it fired, the watchdog ends by killing what TERM left.
  [ -e $SCRATCH/overdue-$pid ] || kill -- -$dog 2>/dev/null
  wait $dog 2>/dev/null
  return $rc
}
shopt -s nullglob
# VMTEST_LIST: these script names exactly (run.sh boots one guest per
# kernel command line the scripts ask for); else the VMTEST_ONLY glob.
if [ -n "${VMTEST_LIST:-}" ]; then
  scripts=(); for n in $VMTEST_LIST; do scripts+=("$here/$n"); done
else
  scripts=("$here"/t-${VMTEST_ONLY:-*}.sh)
fi
expected=0
[ ${#scripts[@]} -gt 0 ] || fail "VMTEST_ONLY='${VMTEST_ONLY:-*}' matches no $here/t-*.sh"
for t in "${scripts[@]}"; do
  name=$(basename "$t")
  want=$(sed -n '1s/^# vmtest-checks: \([0-9][0-9]*\)$/\1/p' "$t")
  echo "guest: $name (${want:-?} checks)"
  before=$(reported); start=$(date +%s)
  run_limited "$t"; rc=$?
  got=$(( $(reported) - before ))
  echo "guest: $name took $(( $(date +%s) - start )) s"
  if [ -z "$want" ]; then
    fail "$name: no '# vmtest-checks: N' first line"; continue
  fi
  expected=$((expected + want))
  [ "$rc" -eq 0 ] || fail "$name exited with status $rc"
  [ "$got" -eq "$want" ] || fail "$name reported $got checks, expected $want"
done
p=$(wc -l < $PASSED); f=$(wc -l < $FAILED)
echo "$p passed, $f failed, $expected expected"
[ "$f" -eq 0 ] && [ "$p" -eq "$expected" ]
