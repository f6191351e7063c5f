#!/bin/bash
# Installs what building, testing, the demo and the benchmark need on Debian 12.
# Idempotent: only missing packages are installed. Run as root.
set -euo pipefail

PKGS=(clang llvm libelf-dev zlib1g-dev pkg-config make gcc libc6-dev bpftool fio prometheus bpftrace util-linux curl jq python3)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root (sudo make ...)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's prometheus package starts a server on :9090; iowarden's tests run their
# own on loopback, so keep the packaged one from holding the port.
if systemctl is-active --quiet prometheus 2>/dev/null; then systemctl stop prometheus || true; fi

if ! command -v cargo >/dev/null && [[ -x $HOME/.cargo/bin/cargo ]]; then
  export PATH=$HOME/.cargo/bin:$PATH
fi
if ! command -v cargo >/dev/null; then
  echo "install-deps: no Rust toolchain (cargo) found; install Rust >= 1.80 (rustup) and re-run" >&2
  exit 1
fi
