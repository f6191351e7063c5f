#!/bin/bash
# The worked example of docs/culprits.md: a QD1 4 KiB reader /v beside a
# 128 KiB sequential writer /hog (QD16) and a 4 KiB random reader /scan
# (QD32), on a loop device over a 1 GiB file of random data, and
# `iowarden top` over them. As root, from the repository, after
# `make build`; cgroup v1 (blkio) or v2 (io). Prints top's last window.
set -euo pipefail
BIN=${IOWARDEN_BIN:-target/release/iowarden}
IMG=$(mktemp /var/tmp/iowarden-culprits-XXXXXX.img)
dd if=/dev/urandom of="$IMG" bs=1M count=1024 status=none
LOOP=$(losetup -f --show --direct-io=on "$IMG")
if [ -d /sys/fs/cgroup/blkio ]; then ROOT=/sys/fs/cgroup/blkio; else ROOT=/sys/fs/cgroup; echo +io > $ROOT/cgroup.subtree_control; fi
cleanup() {
    wait || true
    losetup -d "$LOOP"; rm -f "$IMG"
    rmdir $ROOT/v $ROOT/hog $ROOT/scan 2>/dev/null || true
}
trap cleanup EXIT
for c in v hog scan; do mkdir -p $ROOT/$c; done
incg() { local c=$1; shift; sh -c "echo \$\$ > $ROOT/$c/cgroup.procs; exec $*"; }
job="--filename=$LOOP --direct=1 --runtime=10 --time_based --output=/dev/null"
incg v fio --name=v $job --rw=randread --bs=4k --size=256M &
incg hog fio --name=hog $job --rw=write --bs=128k --iodepth=16 --ioengine=libaio --offset=768M --size=256M &
incg scan fio --name=scan $job --rw=randread --bs=4k --iodepth=32 --ioengine=libaio --offset=256M --size=256M &
sleep 1
# From the last window's title on (its table, verdict and panels), and the closing verdict.
"$BIN" top --device "$(basename "$LOOP")" --interval 2s --duration 6s 2>/dev/null | tac | sed '/^iowarden top /q' | tac
