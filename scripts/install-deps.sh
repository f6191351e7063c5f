#!/bin/bash
# Installs what iowarden needs on Debian 12, by purpose. Idempotent: only
# missing packages are installed. Run as root.
#   scripts/install-deps.sh          build, `make deb` and `make demo` (compiler, libbpf's deps, protoc, fio, dpkg-dev)
#   scripts/install-deps.sh --bench  + what `make bench` compares against (libbpf-tools, bpftrace, bpftool, curl)
#   scripts/install-deps.sh --test   + everything `make test` and `make image` use (Prometheus, promtool,
#                                      systemd-analyze, buildah and podman, a Kubernetes validator, the Grafana SDK,
#                                      nightly + cargo-fuzz)
#   scripts/install-deps.sh --dashboards  only what `make dashboards` uses: python3-venv and
#                                      grafana-foundation-sdk (dashboards/generate.py) in $IOWARDEN_TOOLS
set -euo pipefail

tier=demo
case "${1:-}" in
  "") ;;
  --bench) tier=bench ;;
  --test) tier=test ;;
  --dashboards) tier=dashboards ;;
  *) echo "install-deps: unknown option '$1' (use --bench, --test or --dashboards)" >&2; exit 2 ;;
esac

# clang also brings libclang (libclang1-N), which build.rs's bindgen loads for the
# headers' constants.
# binutils (objcopy) and dpkg-dev (dpkg-shlibdeps): make deb.
PKGS=(clang llvm libelf-dev zlib1g-dev pkg-config make gcc libc6-dev fio util-linux protobuf-compiler libprotobuf-dev binutils dpkg-dev)
BENCH_PKGS=(bpftool bpftrace libbpf-tools libbpf1 curl python3)
# buildah, podman and runc: make image and the test that runs it (runc: crun 1.8
# refuses a hybrid cgroup layout).
TEST_PKGS=("${BENCH_PKGS[@]}" prometheus jq python3-yaml python3-venv systemd openssl buildah podman runc)
case $tier in
  bench) PKGS+=("${BENCH_PKGS[@]}") ;;
  test) PKGS+=("${TEST_PKGS[@]}") ;;
  dashboards) PKGS=(python3 python3-venv) ;;
esac

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

# Grafana's dashboards-as-code SDK for dashboards/generate.py (make dashboards; make test
# checks the committed JSON against it): pure Python, in a venv of Debian's python3, pinned.
# The version is <build epoch>!<Grafana version>: the newest build for Grafana 11.6.
TOOLS=${IOWARDEN_TOOLS:-/opt/iowarden-tools}
GRAFANA_SDK_VERSION='1769699379!11.6.0'
if [[ $tier == test || $tier == dashboards ]] &&
  [[ $("$TOOLS/bin/python" -c 'import importlib.metadata as m; print(m.version("grafana-foundation-sdk"))' 2>/dev/null) != "$GRAFANA_SDK_VERSION" ]]; then
  echo "install-deps: installing grafana-foundation-sdk $GRAFANA_SDK_VERSION into $TOOLS"
  [[ -x $TOOLS/bin/pip ]] || /usr/bin/python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q --disable-pip-version-check "grafana-foundation-sdk==$GRAFANA_SDK_VERSION"
fi
[[ $tier != dashboards ]] || exit 0

if ! command -v cargo >/dev/null && [[ -x $HOME/.cargo/bin/cargo ]]; then
  export PATH=$HOME/.cargo/bin:$PATH
fi
if ! command -v cargo >/dev/null; then
  echo "install-deps: no Rust toolchain (cargo) found; install Rust >= 1.89 (rustup) and re-run" >&2
  exit 1
fi
[[ $tier == test ]] || exit 0

# Debian's prometheus package starts a server on :9090; iowarden's tests run their
# own on loopback, so keep the packaged one from holding the port.
if systemctl is-active --quiet prometheus 2>/dev/null; then systemctl stop prometheus || true; fi

# Kubernetes manifest validator with the OpenAPI schemas bundled (works offline;
# kubeconform is not packaged in Debian). In the same venv, pinned.
KV_VERSION=1.37.0
if [[ $("$TOOLS/bin/kubernetes-validate" --version 2>/dev/null) != "$KV_VERSION" ]]; then
  echo "install-deps: installing kubernetes-validate $KV_VERSION into $TOOLS"
  /usr/bin/python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi

# Fuzzing the knob parsers (make fuzz-build / make fuzz): nightly toolchain and cargo-fuzz.
if command -v rustup >/dev/null && ! rustup toolchain list | grep -q '^nightly'; then
  echo "install-deps: installing the nightly Rust toolchain (for cargo-fuzz)"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "install-deps: installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
