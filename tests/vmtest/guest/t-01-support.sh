# vmtest-checks: 2
# vmtest-beside: yes
# What iowarden says works on this kernel: the support row `iowarden run`
# prints at start (with --locks and --nvme, off by default, so that their columns say what the
# kernel allows), and what its block programs cost here. run.sh builds the
# kernel support table of docs/kernels.md from the "SUPPORT" lines of every kernel
# line's run and prints the "COST" lines beside it.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
PORT=9631
"$IOWARDEN_BIN" run --listen 127.0.0.1:$PORT --locks --nvme --bpf-stats --device $DEV > $SCRATCH/support.log 2>&1 &
IW=$!
ready http://127.0.0.1:$PORT/metrics $IW
row=$(sed -n 's/^iowarden: on Linux [^:]*: \(|.*|\)$/\1/p' $SCRATCH/support.log)
echo "SUPPORT ${VMTEST_KERNEL_LINE:-custom} $row"
# A cell per column of docs/kernels.md's table but the kernel's (a unit
# test keeps that header the one iowarden prints rows for), block I/O
# accounting never missing, and no probe left off by default (its switch
# belongs beside --locks above: the row says what the kernel allows).
header=$(sed -n '/^<!-- kernel-support-rows -->$/{n;p}' "$(dirname "$0")/../../../docs/kernels.md")
ok "iowarden prints its support row: a cell per documented column, block I/O not missing, no probe left off" \
  "[ \$(printf '%s' \"\$row\" | tr -cd '|' | wc -c) -eq \$(( \$(printf '%s' \"\$header\" | tr -cd '|' | wc -c) - 1 )) ] && ! printf '%s' \"\$row\" | grep -q '^| ✗\\|off by default'"
[ -n "$row" ] || sed 's/^/  log: /' $SCRATCH/support.log

# BPF time of the block programs per request fio completed (the kernel's
# run-time statistics, on while iowarden runs with --bpf-stats): every
# block program counts, the issue program too where it is attached; the
# nvme_* programs' time apart.
prog_ns() {  # program-name prefix
  curl -sf http://127.0.0.1:$PORT/metrics | awk -v p="$1" '
    index($0, "iowarden_bpf_program_run_seconds_total{program=\"" p) == 1 { s += $2 }
    END { printf "%.0f\n", s * 1e9 }'
}
ns0=$(prog_ns block_rq_); nv0=$(prog_ns nvme_)
fio --name=cost --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=16 \
  --number_ios=20000 --size=1G --output-format=json --output=$SCRATCH/cost-fio.json > /dev/null 2>&1
ios=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['read']['total_ios'])" $SCRATCH/cost-fio.json)
# The poll after fio's last completion has the programs' final times.
sleep 2
ns1=$(prog_ns block_rq_); nv1=$(prog_ns nvme_)
nvme_progs=$(curl -sf http://127.0.0.1:$PORT/metrics | grep -c '^iowarden_bpf_program_runs_total{program="nvme_' || true)
kill $IW 2>/dev/null; wait $IW 2>/dev/null
per=$(( (ns1 - ns0) / (ios > 0 ? ios : 1) ))
nvme_per=$(( (nv1 - nv0) / (ios > 0 ? ios : 1) ))
programs=$(grep -o 'attached block_rq_issue' $SCRATCH/support.log | head -1)
echo "COST ${VMTEST_KERNEL_LINE:-custom} $per ns of BPF per 4 KiB read on nvme0n1 under TCG (${ios} reads; ${programs:-one program per request}); $( [ "$nvme_progs" -gt 0 ] && echo "the $nvme_progs nvme programs $nvme_per ns more" || echo "no nvme programs attached")"
# The peer under the same reads, where installed (scripts/install-deps.sh
# --bench): bcc's libbpf-tools biolatency, its programs' time from the
# kernel's stats (on while it runs). Printed beside ours, not asserted.
# (its tp_btf programs are block_rq_*_btf; Debian's bpftool names no pids)
peer_ns() {  # BPF run time of biolatency's programs, ns (empty: none loaded)
  bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
progs = [p for p in json.load(sys.stdin) if p.get("name", "").startswith("block_rq_") and p["name"].endswith("_btf")]
print(sum(p.get("run_time_ns", 0) for p in progs) if progs else "")'
}
peer="biolatency not installed"
if [ -x /usr/sbin/biolatency ] && command -v bpftool > /dev/null; then
  sysctl -qw kernel.bpf_stats_enabled=1
  /usr/sbin/biolatency 600 1 > $SCRATCH/biolatency.log 2>&1 &
  BL=$!
  for _ in $(seq 100); do [ -n "$(peer_ns)" ] && break; kill -0 $BL 2>/dev/null || break; sleep 0.2; done
  b0=$(peer_ns)
  fio --name=peer --filename=/dev/$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=16 \
    --number_ios=20000 --size=1G --output-format=json --output=$SCRATCH/peer-fio.json > /dev/null 2>&1
  b1=$(peer_ns)
  kill $BL 2>/dev/null; wait $BL 2>/dev/null
  sysctl -qw kernel.bpf_stats_enabled=0
  bios=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['read']['total_ios'])" $SCRATCH/peer-fio.json)
  if [ -n "$b0" ] && [ -n "$b1" ]; then
    peer="biolatency $(( (b1 - b0) / (bios > 0 ? bios : 1) )) ns per read (${bios} reads)"
  else
    peer="biolatency did not load its programs: $(grep -v '^$' $SCRATCH/biolatency.log | tail -1)"
  fi
fi
echo "COST-PEER ${VMTEST_KERNEL_LINE:-custom} $peer"
# Where the support row's NVMe cell says the nvme object is on, its three
# programs' time is exported too (all of what iowarden runs per command).
nvme_on=$(printf '%s' "$row" | awk -F'|' '{ print ($4 ~ /^ *✗/) ? 0 : 1 }')
ok "BPF time per request measured (bpf_stats), the nvme programs' too where attached" \
  "[ \"$ios\" -ge 20000 ] && [ $per -gt 0 ] && { [ $nvme_on = 0 ] && [ $nvme_progs = 0 ] || { [ $nvme_progs = 3 ] && [ $nvme_per -gt 0 ]; }; }"
