#!/bin/bash
# deb.sh [BIN] [OUTDIR]: iowarden's Debian package (make deb), built with
# dpkg-deb from this tree, nothing to install: the binary (debug info
# stripped) as /usr/bin/iowarden, deploy/systemd/iowarden.service as the
# package's unit (its ExecStart pointed at /usr/bin), the README and docs/,
# and the maintainer scripts of packaging/debian. Depends come from the
# binary's shared libraries (dpkg-shlibdeps). Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/iowarden}
out=${2:-target/debian}
[[ -x $bin ]] || { echo "deb.sh: no binary at $bin (make build)" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
install -d -m0755 "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/usr/share/doc/iowarden/docs"
objcopy --strip-debug "$bin" "$root/usr/bin/iowarden"
chmod 0755 "$root/usr/bin/iowarden"
unit=deploy/systemd/iowarden.service
grep -q '^ExecStart=/usr/local/bin/iowarden ' "$unit" || { echo "deb.sh: $unit's ExecStart is not /usr/local/bin/iowarden" >&2; exit 1; }
sed -e 's|^ExecStart=/usr/local/bin/iowarden |ExecStart=/usr/bin/iowarden |' \
    -e 's|^# iowarden on a host managed by systemd\. Install the binary as$|# iowarden on a host managed by systemd, as the Debian package installs it.|' \
    -e '/^# \/usr\/local\/bin\/iowarden, this file as \/etc\/systemd\/system\/iowarden.service,$/d' \
    -e 's|^# then `systemctl enable --now iowarden`\. Checked|# Checked|' \
    "$unit" > "$root/lib/systemd/system/iowarden.service"
install -m0644 README.md "$root/usr/share/doc/iowarden/"
install -m0644 docs/*.md "$root/usr/share/doc/iowarden/docs/"
printf 'iowarden\nCopyright: the iowarden authors\nLicense: GPL-2.0-only (/usr/share/common-licenses/GPL-2)\n' \
  > "$root/usr/share/doc/iowarden/copyright"
for s in postinst prerm postrm; do install -m0755 "packaging/debian/$s" "$root/DEBIAN/$s"; done
# dpkg-shlibdeps reads a debian/control of the source it is run in.
mkdir -p "$stage/src/debian"
printf 'Source: iowarden\n\nPackage: iowarden\nArchitecture: any\n' > "$stage/src/debian/control"
depends=$(cd "$stage/src" && dpkg-shlibdeps -O -e "$root/usr/bin/iowarden" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: iowarden
Version: $version
Architecture: $arch
Maintainer: iowarden maintainers <iowarden@localhost>
Installed-Size: $size
Depends: $depends
Section: admin
Priority: optional
Description: per-cgroup block I/O isolation observability (eBPF)
 Per cgroup, device and operation: I/O counts, bytes and latency split into
 throttle, queue, device and total, NVMe queue occupancy and head-of-line
 interference, iocost internals and lock wait, served as OpenMetrics and
 JSON; every io limit judged in effect or not; knob write-back with a
 journal, device cost models and an online io.cost.qos tuner.
CONTROL
mkdir -p "$out"
deb=$out/iowarden_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
