#!/bin/bash
# make vmtest: boots guest kernels under QEMU with an emulated 4-queue NVMe
# device and a pure cgroup v2 hierarchy, and runs guest/t-*.sh inside them.
# The guest sees the host's root read-only (virtio-fs); scratch goes to /run.
#   KERNELS='6.1 5.10 6.12'   Debian kernel lines to run (kernel.sh fetches
#                             them); each script says on which it runs
#                             ("# vmtest-kernels: 6.1" in its lines 2-5;
#                             none: every line but 6.1-iolatency, the line
#                             built from Debian's source with io.latency:
#                             make vmtest-iolatency, only the scripts that
#                             name it)
#   KERNEL=/path/to/bzImage   one kernel of your own instead: every script
#                             (6.1-iolatency's when VMTEST_ONLY names them)
#   VMTEST_TIMEOUT=1500       seconds before a hung guest is killed
#   VMTEST_JOBS=1             guests booted at once (each with its own NVMe
#                             image; only those whose scripts all say
#                             "# vmtest-beside: yes" beside another): 1 on
#                             a 2-core machine, where checks failed by
#                             chance with two (below)
#   IOWARDEN_BIN=...          the binary the guest tests run
#   VMTEST_ONLY='40-*'        run only the guest tests t-<glob>.sh
#   VMTEST_PLAN=1             print the guest boots, in order, and exit
#   VMTEST_ONLY='m-47-model'  run a measurement script (guest/m-*.sh: proofs too
#                             long, or too close to their bound, for make test)
#   VMTEST_CACHE=dir          where the venv, NVMe image and logs live
#   VMTEST_DRIVE='throttling.iops-total=1000,throttling.bps-total=268435456'
#                             QEMU drive options for every script instead of
#                             their "vmtest-drive" lines (another device point)
#   VMTEST_RUNQLAT=1          t-45 also runs libbpf-tools' runqlat on the LC
#                             cgroup and prints it (off in make test: attaching
#                             to sched_switch under load once hung a 6.1 guest)
#   VMTEST_TRACE=/abs/dir     every guest command timestamped into
#                             DIR/LINE/SCRIPT.trace (where a script's time goes:
#                             tests/vmtest/trace-summary.py DIR/LINE)
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$PWD
CACHE=${VMTEST_CACHE:-/var/cache/iowarden-vmtest}
TIMEOUT=${VMTEST_TIMEOUT:-1500}
export IOWARDEN_BIN=${IOWARDEN_BIN:-$TOP/target/release/iowarden}

# header SCRIPT checks|kernels|append|drive|beside: a "# vmtest-KEY: value"
# line (checks: line 1; the others: lines 2-5).
header() {
  case $2 in
    checks) sed -n '1s/^# vmtest-checks: \([0-9][0-9]*\)$/\1/p' "$1" ;;
    kernels) sed -n '2,5s/^# vmtest-kernels: \([0-9a-z. -]*\)$/\1/p' "$1" ;;
    append) sed -n '2,5s/^# vmtest-append: \(.*\)$/\1/p' "$1" ;;
    drive) if [[ -n ${VMTEST_DRIVE:-} ]]; then echo "$VMTEST_DRIVE"; else
      sed -n '2,5s/^# vmtest-drive: \([a-z0-9.=,-]*\)$/\1/p' "$1"; fi ;;
    beside) sed -n '2,5s/^# vmtest-beside: \(yes\)$/\1/p' "$1" ;;
  esac
}

# The selection, before anything is installed or booted: a VMTEST_ONLY
# that matches nothing is an error. 't-45*' and '45-tune.sh' name the same
# script as '45*'.
only=${VMTEST_ONLY:-*}; only=${only%.sh}
if [[ $only == m-* ]]; then
  pattern=tests/vmtest/guest/$only.sh
else
  only=${only#t-}
  pattern=tests/vmtest/guest/t-$only.sh
fi
JOBS=${VMTEST_JOBS:-1}
selected=()
for t in $pattern; do [[ -f $t ]] && selected+=("$t"); done
if ((${#selected[@]} == 0)); then
  echo "vmtest: VMTEST_ONLY='${VMTEST_ONLY:-}' matches no script in tests/vmtest/guest; nothing would run" >&2
  exit 1
fi
for t in "${selected[@]}"; do
  [[ -n $(header "$t" checks) ]] || { echo "vmtest: $t lacks its '# vmtest-checks: N' first line" >&2; exit 1; }
done
if [[ -n ${KERNEL:-} ]]; then
  lines=(custom)
else
  read -r -a lines <<< "${KERNELS:-6.1 5.10 6.12}"
fi
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "vmtest: VMTEST_JOBS='$JOBS' is not a positive number of guests" >&2; exit 1; }
for l in "${lines[@]}"; do
  [[ $l == custom || $l == 5.10 || $l == 6.1 || $l == 6.12 || $l == 6.1-iolatency ]] ||
    { echo "vmtest: unknown kernel line '$l' in KERNELS (use 5.10, 6.1, 6.12, 6.1-iolatency)" >&2; exit 1; }
done
# The scripts of the selection that run on kernel line $1.
scripts_for() {
  local t k
  for t in "${selected[@]}"; do
    k=$(header "$t" kernels)
    # The built line runs only the scripts that name it (the rest is
    # Debian's 6.1, which make test covers); its own scripts need its
    # io.latency, so a kernel of your own runs them only when VMTEST_ONLY
    # names them.
    if [[ $1 == 6.1-iolatency ]]; then [[ " $k " == *" $1 "* ]] && echo "$t"; continue; fi
    [[ $1 == custom && $k == 6.1-iolatency && -z ${VMTEST_ONLY:-} ]] && continue
    [[ $1 == custom || -z $k || " $k " == *" $1 "* ]] && echo "$t"
  done
  return 0
}
expected=0
for l in "${lines[@]}"; do
  for t in $(scripts_for "$l"); do expected=$((expected + $(header "$t" checks))); done
done
((expected > 0)) || { echo "vmtest: VMTEST_ONLY='${VMTEST_ONLY:-}' selects no script for kernel lines ${lines[*]}" >&2; exit 1; }
echo "vmtest: ${#selected[@]} scripts on kernel lines ${lines[*]}, $expected checks expected"
# Every guest boot of the run, a job each: kernel line, command line,
# drive options, whether it may run beside another guest, scripts, checks,
# log.
jobs=()
for line in "${lines[@]}"; do
  declare -A group_scripts=() group_checks=()
  for t in $(scripts_for "$line"); do
    beside=-   # one guest at a time: a line's scripts stay in one boot
    ((JOBS == 1)) || { beside=$(header "$t" beside); beside=${beside:-no}; }
    key="$(header "$t" append)|$(header "$t" drive)|$beside"   # never empty: bash keys cannot be
    group_scripts[$key]+="$(basename "$t") "
    group_checks[$key]=$(( ${group_checks[$key]:-0} + $(header "$t" checks) ))
  done
  n=0
  for key in "${!group_scripts[@]}"; do
    log=$CACHE/vmtest-$line.log
    ((n == 0)) || log=$CACHE/vmtest-$line-$n.log
    jobs+=("$line|$key|${group_scripts[$key]}|${group_checks[$key]}|$log")
    n=$((n + 1))
  done
  unset group_scripts group_checks
done
# The groups that run alone first, then the others longest first, by what
# each took when it last passed here (one never timed first of all).
durations=$CACHE/vmtest-durations
last_took() {  # job: its seconds, or a large number when never timed
  local secs
  secs=$(awk -F'\t' -v k="${1%|*}" '$2 == k { s = $1 } END { print s }' "$durations" 2>/dev/null)
  echo "${secs:-999999}"
}
mapfile -t jobs < <(for i in "${!jobs[@]}"; do
  alone=0; [[ ${jobs[$i]} == *"|no|"* ]] && alone=1   # the beside field
  printf '%s\t%s\t%s\t%s\n' "$alone" "$(last_took "${jobs[$i]}")" "$i" "${jobs[$i]}"
done | sort -t$'\t' -k1,1nr -k2,2nr -k3,3n | cut -f4-)

if [[ -n ${VMTEST_PLAN:-} ]]; then
  echo "vmtest: the guest boots, in order (line|command line|drive|beside|scripts|checks|log):"
  printf '  %s\n' "${jobs[@]}"
  exit 0
fi
mkdir -p "$CACHE"
if [[ -n ${VMTEST_TRACE:-} ]]; then
  [[ $VMTEST_TRACE == /* ]] || { echo "vmtest: VMTEST_TRACE='$VMTEST_TRACE' is not an absolute path" >&2; exit 1; }
  mkdir -p "$VMTEST_TRACE"
fi

need=()
# dmsetup, lvm2, mdadm: the bio-based volumes of t-17 (the guest runs the host's binaries).
# dosfstools: t-18's vfat mount (a filesystem without cgroup writeback).
# libseccomp-dev, libcap-ng-dev: to build virtiofsd (below).
for p in qemu-system-x86 linux-image-amd64 busybox-static python3-venv fio kmod dmsetup lvm2 mdadm dosfstools \
  libseccomp-dev libcap-ng-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[[ -x $CACHE/venv/bin/vng ]] || { python3 -m venv "$CACHE/venv" && "$CACHE/venv/bin/pip" install -q virtme-ng; }
# virtiofsd, the Rust daemon (Debian 12 ships only QEMU's C one, which vng
# will not use): with it the guest's root is virtio-fs, cached in the guest,
# instead of 9p without a cache, where every exec and open crosses to the
# host (/bin/true took 68 ms in a 6.1 guest, 200 ms in 5.10; python3 1.6
# and 3.2 s). Built once into the cache (about a minute).
VIRTIOFSD_VERSION=1.14.0
command -v cargo >/dev/null || PATH=$HOME/.cargo/bin:$PATH
if [[ $("$CACHE/virtiofsd/bin/virtiofsd" --version 2>/dev/null) != "virtiofsd $VIRTIOFSD_VERSION" ]]; then
  echo "vmtest: building virtiofsd $VIRTIOFSD_VERSION into $CACHE/virtiofsd"
  cargo install -q --locked virtiofsd --version "$VIRTIOFSD_VERSION" --root "$CACHE/virtiofsd"
fi
export PATH=$CACHE/virtiofsd/bin:$CACHE/venv/bin:$PATH   # vng finds both by name

declare -A image
for l in "${lines[@]}"; do
  if [[ $l == custom ]]; then image[$l]=$KERNEL; else image[$l]=$(tests/vmtest/kernel.sh "$l"); fi
  [[ -r ${image[$l]} ]] || { echo "vmtest: kernel ${image[$l]} not readable" >&2; exit 1; }
done

# This workplace's /dev/kvm is a PVM-style KVM on which a stock kernel hangs
# silently: use KVM only where its module is the ordinary kvm_intel/kvm_amd.
accel=(--disable-kvm)
qaccel="-accel tcg,thread=multi"
if [[ -w /dev/kvm ]] && grep -qE '^kvm_(intel|amd) ' /proc/modules 2>/dev/null; then
  accel=(); qaccel=""
fi

# The NVMe device is throttled to 256 MiB/s, like a modest SSD: unthrottled,
# the emulation serves reads from the host page cache so fast that large
# requests are hardly ever in flight, and no controller sees contention.
# One image per guest running at once: nvme.img, nvme-1.img, ...
nvme_image() {  # worker
  local img=$CACHE/nvme.img
  (($1 == 0)) || img=$CACHE/nvme-$1.img
  [[ -f $img ]] || truncate -s 2G "$img"
  echo "$img"
}
# A guest one of whose vCPUs stopped: RCU reports it stalled having taken
# no timer tick at all ("(0 ticks this GP)"), again every 63 s. In a local
# CI on 2026-11-29 a 6.1 guest's CPU 1 stopped as t-17 began (iowarden
# attaching, as with the int3 below) and the run waited out its 1200 s. Two
# such reports (~84 s stopped) end the guest.
vcpu_stopped() {  # log
  [[ $(grep -cE '^\[ *[0-9.]+\] rcu:[[:space:]]+[0-9]+-[^:]*: \(0 ticks this GP\)' "$1" 2>/dev/null) -ge 2 ]]
}
# One guest boot per kernel line, command line, NVMe drive and whether its
# scripts may run beside another guest: a script may ask for more in its
# lines 2-5, for the command line ("# vmtest-append: possible_cpus=192") or
# QEMU's drive options ("# vmtest-drive: throttling.iops-total=2000"; a
# throttling.bps-total, or any of a direction's caps, there replaces the
# default: QEMU refuses totals beside read/write caps), and runs in a guest of
# its own with them; "# vmtest-beside: yes" (below) puts it in the guest
# of its line's scripts that say so.
# Runs in a worker (below): adds its time to $job_took, returns non-zero
# when the group did not pass.
boot() {  # line extra-cmdline extra-drive-options scripts expected log image [retried]
  local line=$1 extra=$2 drive=$3 list=$4 want=$5 log=$6 img=$7 retried=${8:-} rc summary start kernel=${image[$1]}
  local drive_opts=throttling.bps-total=268435456
  [[ $drive =~ throttling\.(bps-total|bps-read|bps-write|iops-read|iops-write)= ]] && drive_opts=""
  drive_opts=$drive_opts${drive_opts:+${drive:+,}}$drive
  start=$(date +%s)
  echo "vmtest: [$line] booting $kernel (${accel[*]:-KVM}) ${extra:+with '$extra' }for $list; drive $drive_opts; timeout ${TIMEOUT}s; log in $log"
  set +e
  # "| cat": QEMU's file chardev truncates a regular file given as stdout.
  # --verbose: the guest kernel's console goes to the log (without it vng
  # sends it nowhere, loglevel or not), so a guest that dies says why: a
  # 6.12 guest ended in t-45 without a word in 4 of about 16 runs.
  # tsc=reliable: with it verified at run time, the clocksource watchdog of
  # a busy TCG guest marks the TSC unstable, the kernel patches the static
  # branch in sched_clock_cpu live, and TCG runs the other vCPU's stale
  # int3 ("Oops: int3" in sched_clock_cpu+0x9 on both vCPUs, a panic in
  # interrupt: how those 6.12 guests died).
  # In the background, watched: a stopped vCPU ends it (TERM to timeout,
  # which passes it to QEMU's process group).
  (
    timeout --kill-after=10 "$TIMEOUT" vng --verbose --run "$kernel" "${accel[@]}" ${VMTEST_TRACE:+--rwdir="$VMTEST_TRACE"} --cpus 2 --memory 2G \
      --append "cgroup_no_v1=all loglevel=4 tsc=reliable $extra" \
      --qemu-opts="$qaccel -drive file=$img,if=none,id=nvm,format=raw,$drive_opts -device nvme,serial=iowarden,drive=nvm,max_ioqpairs=4" \
      --exec "IOWARDEN_BIN=$IOWARDEN_BIN VMTEST_KERNEL_LINE=$line VMTEST_LIST='$list' VMTEST_DRIVE='$drive_opts' VMTEST_RUNQLAT=${VMTEST_RUNQLAT:-0} VMTEST_TRACE=${VMTEST_TRACE:+$VMTEST_TRACE/$line} $TOP/tests/vmtest/guest/run-all.sh" 2>&1 | cat > "$log"
    exit "${PIPESTATUS[0]}"
  ) &
  local guest=$! stopped=
  while kill -0 "$guest" 2>/dev/null; do
    if vcpu_stopped "$log"; then
      stopped=1
      pkill -TERM -P "$guest" -x timeout
      break
    fi
    sleep 1   # (at 5 s a guest's end waited 2.5 s on average, six boots a run)
  done
  wait "$guest"; rc=$?
  set -e
  grep -E 'PASS|FAIL|^  |^(OK|BAD) |passed, |guest:' "$log" || true
  grep -q 'fallback to 9p' "$log" && echo "vmtest: [$line] virtiofsd did not start: the guest's root was 9p (much slower); see $log" >&2
  echo "vmtest: [$line] boot + tests took $(( $(date +%s) - start )) s"
  job_took=$(( job_took + $(date +%s) - start ))
  if [[ -n $stopped ]]; then
    if [[ -z $retried ]]; then
      mv "$log" "$log.stall"
      echo "vmtest: [$line] a vCPU stopped (RCU stall reports with no tick taken, see $log.stall): the guest was ended; booting this group once more" >&2
      boot "$line" "$extra" "$drive" "$list" "$want" "$log" "$img" retried
      return
    fi
    echo "vmtest: [$line] a vCPU stopped again (see $log)" >&2
    return 1
  fi
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "vmtest: [$line] the guest did not finish within ${TIMEOUT}s and was killed (see $log); its last lines:" >&2
    tail -n 30 "$log" | sed 's/^/  | /' >&2
    return 1
  fi
  # "|| true": without a summary line grep fails, and under pipefail the
  # assignment would end this script with no word of why (a 6.12 guest
  # that ended early in CI left nothing but its last check).
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ expected$' "$log" | tail -1 || true)
  # QEMU's multi-threaded TCG can run a breakpoint the kernel already
  # removed from code it patched live (a tracepoint's static call or key,
  # flipped as a program attaches or detaches under I/O): "Oops: int3" in
  # kernel text, a panic, no summary line. The emulator's fault, not a
  # test's (on 6.12, in blk_mq_end_request_batch: at t-48's start and, on
  # 2026-11-28, at t-18's, in two local CIs): the group boots once more,
  # from its first script, with the dead guest's log kept beside.
  if [[ -z $summary && -z $retried ]] && grep -q '^\[ *[0-9.]*\] Oops: int3' "$log"; then
    mv "$log" "$log.int3"
    echo "vmtest: [$line] the guest died of TCG's stale breakpoint (Oops: int3, see $log.int3): booting this group once more" >&2
    boot "$line" "$extra" "$drive" "$list" "$want" "$log" "$img" retried
    return
  fi
  if [[ $summary != "$want passed, 0 failed, $want expected" ]]; then
    echo "vmtest: [$line] guest tests failed (rc $rc): '${summary:-no summary line}', want $want passed of $want; see $log" >&2
    if [[ -z $summary ]]; then
      echo "vmtest: [$line] the guest's last lines (vng/QEMU exit status $rc):" >&2
      tail -n 25 "$log" | sed 's/^/  | /' >&2
    fi
    return 1
  fi
}

# JOBS workers, each with an NVMe image of its own, take the jobs in that
# order; a job's output is printed whole when it ends, and after a failure
# no new guest boots. A guest runs beside another only if every script of
# both says it may ("# vmtest-beside: yes"); any other has the machine to
# itself. Those that do passed beside a line's whole suite in trials on
# this 2-core machine on 2026-12-02, where two whole lines at once slowed
# each script 1.15-1.65x and failed t-22's split between two culprits
# (0.101 from their device-time shares, against 0.1), beside t-47 t-18's
# window over io.max's hold (the reads fell outside it), and in a third,
# 5.10's t-35 beside 6.12's marked scripts (ic-a 22 % of the I/O against
# its weight's 17 %): checks whose timing or throughput assume a guest
# alone on two cores. Hence one guest at a time by default.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
take_job() {  # prints the index of the next job once it may start, "wait", or nothing when none is left
  local i line extra drive list want beside log pick="" left=0 running
  exec 9> "$work/lock"
  flock 9
  running=$(find "$work" -maxdepth 1 -name 'running-*' | wc -l)
  if [[ ! -e $work/failed ]] && [[ ! -e $work/alone ]]; then
    for i in "${!jobs[@]}"; do
      [[ -e $work/taken-$i ]] && continue
      left=1
      IFS='|' read -r line extra drive beside list want log <<< "${jobs[$i]}"
      if [[ $beside == yes ]]; then
        pick=$i
      elif ((running == 0)); then
        pick=$i; : > "$work/alone"
      fi
      break
    done
    [[ -n $pick ]] && : > "$work/taken-$pick" && : > "$work/running-$pick"
  elif [[ ! -e $work/failed ]]; then
    left=1
  fi
  flock -u 9
  if [[ -n $pick ]]; then echo "$pick"; elif ((left)); then echo wait; fi
}
worker() {  # worker
  local img i line extra drive list want beside log rc
  img=$(nvme_image "$1")
  while i=$(take_job) && [[ -n $i ]]; do
    if [[ $i == wait ]]; then sleep 5; continue; fi
    IFS='|' read -r line extra drive beside list want log <<< "${jobs[$i]}"
    echo "vmtest: [$line] guest $1 boots for $list$([[ $beside != no ]] || echo ' (alone)')"
    job_took=0 rc=0
    boot "$line" "$extra" "$drive" "$list" "$want" "$log" "$img" > "$work/job-$i.out" 2>&1 || rc=$?
    echo "$rc $job_took" > "$work/job-$i.result"
    ((rc == 0)) || : > "$work/failed"
    flock "$work/lock" bash -c 'rm -f "$1/running-$2"; [[ $3 == yes ]] || rm -f "$1/alone"; cat "$1/job-$2.out"' \
      _ "$work" "$i" "$beside"
  done
}
# A previous run's logs of these lines would lend support-table.sh rows
# and costs this run did not measure.
for line in "${lines[@]}"; do
  rm -f "$CACHE/vmtest-$line.log" "$CACHE/vmtest-$line"-*.log "$CACHE/vmtest-$line".log.{int3,stall} \
    "$CACHE/vmtest-$line"-*.log.{int3,stall}
done
start=$(date +%s)
echo "vmtest: ${#jobs[@]} guest boots, $JOBS at once"
for ((w = 0; w < JOBS; w++)); do worker "$w" & done
wait

declare -A ran passed took
failed=0
for i in "${!jobs[@]}"; do
  IFS='|' read -r line extra drive beside list want log <<< "${jobs[$i]}"
  if [[ ! -e $work/job-$i.result ]]; then
    echo "vmtest: [$line] not booted after a failure: $list" >&2; failed=1; continue
  fi
  read -r rc secs < "$work/job-$i.result"
  took[$line]=$(( ${took[$line]:-0} + secs ))
  if ((rc != 0)); then failed=1; continue; fi
  ran[$line]+="$list"
  passed[$line]=$(( ${passed[$line]:-0} + want ))
  printf '%s\t%s\n' "$secs" "${jobs[$i]%|*}" >> "$durations"
done
# The newest time of each job only.
if [[ -f $durations ]]; then
  tac "$durations" | awk -F'\t' '!seen[$2]++' | tac > "$durations.new" && mv "$durations.new" "$durations"
fi
echo "vmtest: the guests took $(( $(date +%s) - start )) s, $JOBS at once"
((failed == 0)) || exit 1
echo "vmtest: per kernel line, what ran (every check passed):"
for line in "${lines[@]}"; do
  echo "  $line ($(basename "${image[$line]}")): ${passed[$line]:-0} checks in ${took[$line]:-0} s of guest time: ${ran[$line]:-nothing}"
done
tests/vmtest/support-table.sh "$CACHE" "${lines[@]}"
