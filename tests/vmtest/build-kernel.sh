#!/bin/bash
# build-kernel.sh: prints the bzImage of the 6.1-iolatency guest kernel,
# building it first if needed: Debian's own 6.1 source (the linux-source-6.1
# package, from the host's apt) configured with virtme-ng's defconfig and
# tests/vmtest/iolatency.config (all built in: io.latency, which Debian's
# kernels lack, beside what the guest suite needs). Cached under
# $KERNELS_DIR/6.1-iolatency: the extracted source, kept for incremental
# rebuilds, and one image per source version and configuration
# (<version>-<hash of the fragment>/: bzImage, config, build log, and
# lib/modules for modprobe of built-ins). The first build takes about
# 25 minutes on 2 cores (docs/testing.md); later runs print the cached image.
# /lib/modules/<release> becomes a symlink to the image's, as kernel.sh does
# for Debian's kernels (the guest sees the host's root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KERNELS_DIR=${KERNELS_DIR:-/var/lib/iowarden-vmtest/kernels}
CACHE=${VMTEST_CACHE:-/var/cache/iowarden-vmtest}
fragment=$here/iolatency.config
configure=$CACHE/venv/bin/virtme-configkernel   # run.sh installs virtme-ng there

need=()
for p in linux-source-6.1 build-essential flex bison bc dwarves libelf-dev libssl-dev kmod xz-utils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "build-kernel.sh: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[[ -x $configure ]] || { echo "build-kernel.sh: $configure missing (run.sh installs virtme-ng)" >&2; exit 1; }

srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
key=$srcver-$(sha256sum "$fragment" | cut -c1-12)
top=$KERNELS_DIR/6.1-iolatency
out=$top/$key
if [[ ! -r $out/bzImage ]]; then
  src=$top/linux-source-$srcver
  if [[ ! -e $src/Makefile ]]; then
    echo "build-kernel.sh: extracting Debian's linux-source-6.1 $srcver into $src" >&2
    rm -rf "$src" "$src.tmp" && mkdir -p "$src.tmp"
    tar -C "$src.tmp" -xaf /usr/src/linux-source-6.1.tar.xz
    mv "$src.tmp/linux-source-6.1" "$src" && rmdir "$src.tmp"
  fi
  mkdir -p "$out.tmp"
  log=$out.tmp/build.log
  echo "build-kernel.sh: building $key with $(nproc) jobs (about 25 min on 2 cores the first time); log in $out/build.log" >&2
  (cd "$src" && "$configure" --defconfig --custom "$fragment") > "$log" 2>&1
  # Every line of the fragment must hold in the result: an option the
  # source does not know, or whose dependencies are unmet, is dropped
  # silently by the kernel's configuration.
  missing=$(grep -E '^(CONFIG_|# CONFIG_.* is not set)' "$fragment" | while read -r want; do
    grep -qxF "$want" "$src/.config" || echo "$want"
  done)
  [[ -z $missing ]] || { echo "build-kernel.sh: the configuration dropped: $missing" >&2; exit 1; }
  start=$(date +%s)
  if ! (cd "$src" && make -j"$(nproc)" bzImage modules && make modules_install INSTALL_MOD_PATH="$out.tmp") >> "$log" 2>&1; then
    echo "build-kernel.sh: the build failed; the last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  cp "$src/arch/x86/boot/bzImage" "$src/.config" "$out.tmp/"
  mv "$out.tmp/.config" "$out.tmp/config"
  echo "build-kernel.sh: built in $(( $(date +%s) - start )) s" | tee -a "$log" >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
release=$(ls "$out/lib/modules")
[[ -e $out/lib/modules/$release/modules.dep ]] || depmod -b "$out" "$release"
if [[ -L /lib/modules/$release || ! -e /lib/modules/$release ]]; then
  ln -sfn "$out/lib/modules/$release" "/lib/modules/$release"
fi
echo "$out/bzImage"
