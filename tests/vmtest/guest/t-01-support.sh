# vmtest-checks: 2
# What iowarden says works on this kernel: the support row `iowarden run`
# prints at start (with --locks, so that the locks column says what the
# kernel allows), and what its block programs cost here. run.sh builds the
# README's kernel support table from the "SUPPORT" lines of every kernel
# line's run and prints the "COST" lines beside it.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
PORT=9631
"$IOWARDEN_BIN" run --listen 127.0.0.1:$PORT --locks --bpf-stats --device $DEV > $SCRATCH/support.log 2>&1 &
IW=$!
for _ in $(seq 600); do curl -sf http://127.0.0.1:$PORT/metrics > /dev/null && break; kill -0 $IW 2>/dev/null || break; sleep 0.2; done
row=$(sed -n 's/^iowarden: on Linux [^:]*: \(|.*|\)$/\1/p' $SCRATCH/support.log)
echo "SUPPORT ${VMTEST_KERNEL_LINE:-custom} $row"
# Five cells, and block I/O accounting never missing.
ok "iowarden prints its support row, block I/O not missing" \
  "[ \$(printf '%s' \"\$row\" | tr -cd '|' | wc -c) -eq 6 ] && ! printf '%s' \"\$row\" | grep -q '^| ✗'"
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
kill $IW 2>/dev/null; wait $IW 2>/dev/null
per=$(( (ns1 - ns0) / (ios > 0 ? ios : 1) ))
nvme_per=$(( (nv1 - nv0) / (ios > 0 ? ios : 1) ))
programs=$(grep -o 'attached block_rq_issue' $SCRATCH/support.log | head -1)
echo "COST ${VMTEST_KERNEL_LINE:-custom} $per ns of BPF per 4 KiB read on nvme0n1 under TCG (${ios} reads; ${programs:-one program per request}); the nvme programs $nvme_per ns more"
ok "BPF time per request measured (bpf_stats)" "[ \"$ios\" -ge 20000 ] && [ $per -gt 0 ]"
