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
  if [ -n "${VMTEST_TRACE:-}" ]; then  # run.sh's VMTEST_TRACE: a host directory
    mkdir -p "$VMTEST_TRACE"
    # (root's bash takes no PS4 from the environment)
    BASH_XTRACEFD=9 bash -c 'PS4="+ \$EPOCHREALTIME \$BASHPID "; set -x; . "$0"' "$t" 9> "$VMTEST_TRACE/$name.trace"; rc=$?
  else
    bash "$t"; rc=$?
  fi
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
