#!/bin/bash
# make test's host stage: every test of the workspace, the host suite's one
# at a time (they share the kernel: loop devices, BPF stats, the backing
# disk), except the modules named in BESIDE, which run in a second process
# beside them. Those do no block I/O and read no host-wide BPF state (a
# daemon and Prometheus over HTTP, a package, files), and the suite leaves
# a core idle about half the time (waiting on fio and polls: two cores 49 %
# busy over the stage, sampled every 10 s in a local CI on 2026-11-29).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
BESIDE=(badinput:: webconfig:: deb:: deploy:: journal:: signals:: image::)
skip=()
for m in "${BESIDE[@]}"; do skip+=(--skip "$m"); done
host=(test --release --locked -p iowarden --test host -- --test-threads=1)
$CARGO test --release --locked --workspace --no-run
$CARGO test --release --locked --workspace --lib --bins
$CARGO test --release --locked --workspace --doc
beside_log=$(mktemp)
trap 'rm -f "$beside_log"' EXIT
$CARGO "${host[@]}" "${BESIDE[@]}" > "$beside_log" 2>&1 &
beside=$!
rc=0
$CARGO "${host[@]}" "${skip[@]}" || rc=$?
wait "$beside" || rc=$?
echo "host suite, the modules run beside the rest (${BESIDE[*]}):"
cat "$beside_log"
exit "$rc"
