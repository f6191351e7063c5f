#!/bin/bash
# make vmtest: boots a guest kernel under QEMU with an emulated 4-queue NVMe
# device and a pure cgroup v2 hierarchy, and runs guest/t-*.sh inside it.
# The guest sees the host's root read-only (9p); scratch goes to /run.
#   KERNEL=/path/to/bzImage   a kernel of your own (default: Debian's linux-image-amd64)
#   VMTEST_TIMEOUT=900        seconds before a hung guest is killed
#   IOWARDEN_BIN=...          the binary the guest tests run
#   VMTEST_ONLY='40-*'        run only the guest tests t-<glob>.sh
#   VMTEST_ONLY='m-47-model'  run a measurement script (guest/m-*.sh: proofs too
#                             long, or too close to their bound, for make test)
#   VMTEST_CACHE=dir          where the venv, NVMe image and log live
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$PWD
CACHE=${VMTEST_CACHE:-/var/cache/iowarden-vmtest}
TIMEOUT=${VMTEST_TIMEOUT:-900}
export IOWARDEN_BIN=${IOWARDEN_BIN:-$TOP/target/release/iowarden}

# The selection and how many checks it must report, before anything is
# installed or booted: a VMTEST_ONLY that matches nothing is an error.
# 't-45*' and '45-tune.sh' name the same script as '45*'.
only=${VMTEST_ONLY:-*}; only=${only%.sh}
shopt -s nullglob
if [[ $only == m-* ]]; then
  selected=(tests/vmtest/guest/$only.sh)
else
  only=${only#t-}
  selected=(tests/vmtest/guest/t-$only.sh)
fi
shopt -u nullglob
# A pattern without glob characters stays in the list even when no file has
# that name.
existing=()
for t in "${selected[@]}"; do [[ -f $t ]] && existing+=("$t"); done
selected=("${existing[@]}")
if ((${#selected[@]} == 0)); then
  echo "vmtest: VMTEST_ONLY='${VMTEST_ONLY:-}' matches no script in tests/vmtest/guest; nothing would run" >&2
  exit 1
fi
expected=0
for t in "${selected[@]}"; do
  n=$(sed -n '1s/^# vmtest-checks: \([0-9][0-9]*\)$/\1/p' "$t")
  [[ -n $n ]] || { echo "vmtest: $t lacks its '# vmtest-checks: N' first line" >&2; exit 1; }
  expected=$((expected + n))
done
echo "vmtest: ${#selected[@]} scripts, $expected checks expected"
mkdir -p "$CACHE"

need=()
for p in qemu-system-x86 linux-image-amd64 busybox-static python3-venv fio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[[ -x $CACHE/venv/bin/vng ]] || { python3 -m venv "$CACHE/venv" && "$CACHE/venv/bin/pip" install -q virtme-ng; }
export PATH=$CACHE/venv/bin:$PATH   # vng runs virtme-run by name

if [[ -z ${KERNEL:-} ]]; then
  # The newest Debian kernel that is installed whole: a modules directory
  # some other package left behind has no image to boot.
  for kver in $(ls /lib/modules | grep -- '-amd64$' | sort -V); do
    [[ -r /boot/vmlinuz-$kver ]] && KERNEL=/boot/vmlinuz-$kver
  done
  [[ -n ${KERNEL:-} ]] || { echo "vmtest: no /boot/vmlinuz-*-amd64 with its /lib/modules directory" >&2; exit 1; }
fi
[[ -r $KERNEL ]] || { echo "vmtest: kernel $KERNEL not readable" >&2; exit 1; }

# This workplace's /dev/kvm is a PVM-style KVM on which a stock kernel hangs
# silently: use KVM only where its module is the ordinary kvm_intel/kvm_amd.
accel=(--disable-kvm)
qaccel="-accel tcg,thread=multi"
if [[ -w /dev/kvm ]] && grep -qE '^kvm_(intel|amd) ' /proc/modules 2>/dev/null; then
  accel=(); qaccel=""
fi

img=$CACHE/nvme.img
# The NVMe device is throttled to 256 MiB/s, like a modest SSD: unthrottled,
# the emulation serves reads from the host page cache so fast that large
# requests are hardly ever in flight, and no controller sees contention.
[[ -f $img ]] || truncate -s 2G "$img"
# One guest boot per kernel command line and NVMe drive: a script may ask
# for more in its lines 2-3, for the command line ("# vmtest-append:
# possible_cpus=192") or QEMU's drive options ("# vmtest-drive:
# throttling.iops-total=2000"; a throttling.bps-total there replaces the
# default), and runs in a guest of its own with them.
declare -A group_scripts group_checks
for t in "${selected[@]}"; do
  extra=$(sed -n '2,3s/^# vmtest-append: \(.*\)$/\1/p' "$t")
  drive=$(sed -n '2,3s/^# vmtest-drive: \([a-z0-9.=,-]*\)$/\1/p' "$t")
  key="${extra}|${drive}"   # never empty: bash keys cannot be
  group_scripts[$key]+="$(basename "$t") "
  group_checks[$key]=$(( ${group_checks[$key]:-0} + $(sed -n '1s/^# vmtest-checks: \([0-9][0-9]*\)$/\1/p' "$t") ))
done
boot() {  # extra-cmdline extra-drive-options scripts expected log
  local extra=$1 drive=$2 list=$3 want=$4 log=$5 rc summary start drive_opts=throttling.bps-total=268435456
  [[ $drive == *throttling.bps-total=* ]] && drive_opts=""
  drive_opts=$drive_opts${drive_opts:+${drive:+,}}$drive
  start=$(date +%s)
  echo "vmtest: booting $KERNEL (${accel[*]:-KVM}) ${extra:+with '$extra' }for $list; drive $drive_opts; timeout ${TIMEOUT}s; log in $log"
  set +e
  # "| cat": QEMU's file chardev truncates a regular file given as stdout.
  timeout --kill-after=10 "$TIMEOUT" vng --run "$KERNEL" "${accel[@]}" --cpus 2 --memory 2G \
    --append "cgroup_no_v1=all $extra" \
    --qemu-opts="$qaccel -drive file=$img,if=none,id=nvm,format=raw,$drive_opts -device nvme,serial=iowarden,drive=nvm,max_ioqpairs=4" \
    --exec "IOWARDEN_BIN=$IOWARDEN_BIN VMTEST_LIST='$list' $TOP/tests/vmtest/guest/run-all.sh" 2>&1 | cat > "$log"
  rc=${PIPESTATUS[0]}
  set -e
  grep -E 'PASS|FAIL|^  |^(OK|BAD) |passed, |guest:' "$log" || true
  echo "vmtest: boot + tests took $(( $(date +%s) - start )) s"
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "vmtest: the guest did not finish within ${TIMEOUT}s and was killed (see $log)" >&2
    return 1
  fi
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ expected$' "$log" | tail -1)
  if [[ $summary != "$want passed, 0 failed, $want expected" ]]; then
    echo "vmtest: guest tests failed (rc $rc): '${summary:-no summary line}', want $want passed of $want; see $log" >&2
    return 1
  fi
}
n=0
for key in "${!group_scripts[@]}"; do
  IFS='|' read -r extra drive <<< "$key"
  boot "$extra" "$drive" "${group_scripts[$key]}" "${group_checks[$key]}" "$CACHE/vmtest${n/#0/}.log"
  n=$((n + 1))
done
