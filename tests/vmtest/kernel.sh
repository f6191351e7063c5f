#!/bin/bash
# kernel.sh LINE: prints the bzImage of Debian's stock kernel for a kernel
# line, fetching it first if needed, and makes its modules visible to the
# guest. Lines: 6.1 (bookworm, the host's own apt: linux-image-amd64),
# 5.10 (bullseye) and 6.12 (trixie); 6.1-iolatency is built from Debian's
# 6.1 source with io.latency (build-kernel.sh). The other suites' kernels come from
# Debian's archive through a private apt configuration under $KERNELS_DIR
# (the host's sources and installed packages are neither read nor
# touched), with
# `apt-get download` and `dpkg-deb -x`: they are never installed as the
# host's kernel. The guest sees the host's root but mounts a tmpfs over
# /var/cache, so the trees live under /var/lib, and /lib/modules/<version>
# is a symlink to the extracted modules (depmod run on them).
set -euo pipefail
line=${1:?usage: kernel.sh 5.10|6.1|6.12|6.1-iolatency}
KERNELS_DIR=${KERNELS_DIR:-/var/lib/iowarden-vmtest/kernels}

case $line in
  6.1) suite=bookworm ;;
  5.10) suite=bullseye ;;
  6.12) suite=trixie ;;
  6.1-iolatency) exec "$(dirname "$0")/build-kernel.sh" ;;
  *) echo "kernel.sh: unknown kernel line '$line' (use 5.10, 6.1, 6.12 or 6.1-iolatency)" >&2; exit 2 ;;
esac

if [[ $suite == bookworm ]]; then
  # The host is Debian 12: its linux-image-amd64 (run.sh installs it).
  pkg=$(dpkg-query -W -f='${Depends}' linux-image-amd64 | sed -n 's/^\(linux-image-[^ ,]*\).*/\1/p')
  ver=${pkg#linux-image-}
  [[ -r /boot/vmlinuz-$ver ]] || { echo "kernel.sh: /boot/vmlinuz-$ver missing (linux-image-amd64 installed?)" >&2; exit 1; }
  echo "/boot/vmlinuz-$ver"
  exit 0
fi

# Private apt state for this suite: the main suite only (bullseye's is
# frozen; trixie's follows its point releases).
apt_dir=$KERNELS_DIR/apt-$suite
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
  > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o Dir::State::Status=/dev/null -o "Dir::Cache=$apt_dir/cache"
  -o APT::Architecture=amd64
  -o APT::Sandbox::User=root)

# The image the suite's linux-image-amd64 depends on, resolved once and
# remembered: a later run boots the same kernel without the network.
if [[ ! -s $apt_dir/package ]]; then
  apt-get "${apt_opts[@]}" -qq update
  apt-cache "${apt_opts[@]}" show linux-image-amd64 | sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p' | head -1 \
    > "$apt_dir/package"
fi
pkg=$(cat "$apt_dir/package")
[[ -n $pkg ]] || { echo "kernel.sh: $suite's linux-image-amd64 names no image" >&2; exit 1; }
ver=${pkg#linux-image-}
tree=$KERNELS_DIR/$ver
if [[ ! -r $tree/boot/vmlinuz-$ver ]]; then
  echo "kernel.sh: fetching $pkg from Debian $suite" >&2
  (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download "$pkg")
  rm -rf "$tree.tmp" && mkdir -p "$tree.tmp"
  dpkg-deb -x "$apt_dir"/debs/"${pkg}"_*.deb "$tree.tmp"
  rm -rf "$tree" && mv "$tree.tmp" "$tree"
  rm -f "$apt_dir"/debs/*.deb
fi

# Modules: /lib/modules/<ver> (bullseye) or /usr/lib/modules/<ver> (trixie).
for base in "$tree" "$tree/usr"; do
  [[ -d $base/lib/modules/$ver ]] || continue
  [[ -e $base/lib/modules/$ver/modules.dep ]] || depmod -b "$base" "$ver"
  if [[ -L /lib/modules/$ver || ! -e /lib/modules/$ver ]]; then
    ln -sfn "$base/lib/modules/$ver" "/lib/modules/$ver"
  fi
done
echo "$tree/boot/vmlinuz-$ver"
