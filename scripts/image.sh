#!/bin/bash
# image.sh [BIN] [OUTDIR] [TAG]: iowarden's OCI image (make image), built offline
# with buildah from scratch: the binary (debug info stripped) and the shared
# libraries it loads, copied from this host, and nothing else, so no base
# image is pulled. Tagged TAG (localhost/iowarden:VERSION) in the local container
# storage (`podman push` it where the DaemonSet pulls from) and saved as
# OUTDIR/iowarden_VERSION.oci.tar (`podman load -i` elsewhere). Prints the
# archive's path.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/iowarden}
out=${2:-target/image}
[[ -x $bin ]] || { echo "image.sh: no binary at $bin (make build)" >&2; exit 1; }
command -v buildah >/dev/null || { echo "image.sh: buildah is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
tag=${3:-localhost/iowarden:$version}
# No systemd here to manage cgroups, no user namespace to set up: root's
# storage, a chroot for the (empty) build steps.
export BUILDAH_ISOLATION=chroot
stage=$(mktemp -d)
ctr=$(buildah --cgroup-manager=cgroupfs from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$stage"' EXIT
objcopy --strip-debug "$bin" "$stage/iowarden"
buildah copy --quiet --chmod 0755 "$ctr" "$stage/iowarden" /usr/bin/iowarden >/dev/null
# The libraries the binary loads (ldd's resolved paths), and its loader.
libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
[[ -n $libs ]] || { echo "image.sh: ldd found no libraries in $bin" >&2; exit 1; }
for lib in $libs; do
  buildah copy --quiet "$ctr" "$(readlink -f "$lib")" "$lib" >/dev/null
done
buildah config --entrypoint '["/usr/bin/iowarden"]' --cmd '["run", "--listen=0.0.0.0:9617"]' \
  --port 9617/tcp --workingdir / \
  --label org.opencontainers.image.title=iowarden \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.licenses=GPL-2.0-only "$ctr"
buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
mkdir -p "$out"
archive=$out/iowarden_$version.oci.tar
rm -f "$archive"
buildah push --quiet "$tag" "oci-archive:$archive:iowarden:$version"
echo "$archive"
