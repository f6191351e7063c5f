# Assertions for guest tests: ok NAME CONDITION (a shell expression).
ok() {
  if eval "$2"; then echo "PASS: $1"; echo "$1" >> "$PASSED"; else echo "FAIL: $1"; echo "$1" >> "$FAILED"; fi
}
CG=/sys/fs/cgroup
DEV=nvme0n1
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
