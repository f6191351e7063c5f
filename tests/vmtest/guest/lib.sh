# Assertions for guest tests: ok NAME CONDITION (a shell expression).
ok() {
  if eval "$2"; then echo "PASS: $1"; echo "$1" >> "$PASSED"; else echo "FAIL: $1"; echo "$1" >> "$FAILED"; fi
}
CG=/sys/fs/cgroup
DEV=nvme0n1
