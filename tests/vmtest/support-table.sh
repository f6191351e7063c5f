#!/bin/bash
# support-table.sh CACHE LINE...: the kernel support table rows of docs/kernels.md,
# built from the "SUPPORT" lines the guests printed (t-01-support.sh: the
# row `iowarden run` itself prints on that kernel), into
# CACHE/support-table.md. When the run covered every line docs/kernels.md lists
# (5.10, 6.1, 6.12), its rows must be exactly these: the table is
# generated, never written by hand.
set -euo pipefail
cache=$1; shift
out=$cache/support-table.md
# The guest logs of kernel line $1 (run.sh: vmtest-LINE.log, vmtest-LINE-N.log).
logs() { cat "$cache/vmtest-$1.log" "$cache/vmtest-$1"-*.log 2>/dev/null || true; }
: > "$out"
for line in "$@"; do
  row=$(logs "$line" | sed -n 's/^SUPPORT [^ ]* \(|.*|\)$/\1/p' | head -1)
  [[ -n $row ]] && echo "| $line $row" >> "$out"
done
sort -t'|' -k2,2V -o "$out" "$out"
[[ -s $out ]] || exit 0
echo "vmtest: kernel support rows (docs/kernels.md, 'Support'):"
cat "$out"
echo "vmtest: BPF time per request (block programs, the nvme programs apart) and the peer's, under the same reads:"
for line in "$@"; do
  logs "$line" | sed -n 's/^COST [^ ]* /  '"$line"': /p' | head -1
  logs "$line" | sed -n 's/^COST-PEER [^ ]* /  '"$line"': /p' | head -1
done
kernels_doc=$(dirname "$0")/../../docs/kernels.md
for line in 5.10 6.1 6.12; do grep -q "^| $line |" "$out" || exit 0; done
documented=$(sed -n '/^<!-- kernel-support-rows -->$/,/^<!-- \/kernel-support-rows -->$/p' "$kernels_doc" | grep '^| [0-9]' || true)
if [[ $documented != "$(cat "$out")" ]]; then
  echo "vmtest: docs/kernels.md's kernel support rows differ from what this run measured:" >&2
  diff <(echo "$documented") "$out" >&2 || true
  echo "vmtest: replace the rows between <!-- kernel-support-rows --> and <!-- /kernel-support-rows --> with $out" >&2
  exit 1
fi
echo "vmtest: docs/kernels.md's kernel support rows match this run"
