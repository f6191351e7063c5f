# vmtest-checks: 1
# vmtest-kernels: 5.10
# vmtest-beside: yes
# Where the kernel has no module BTF (5.10), the nvme programs cannot be
# typed: iowarden must say so in iowarden_probe_active and run the rest
# (t-10 and t-15 check the rest's counts on this kernel).
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
"$IOWARDEN_BIN" run --nvme --listen 127.0.0.1:9632 > $SCRATCH/nvme-absent.log 2>&1 &
IW=$!
ready http://127.0.0.1:9632/metrics "$IW" && get http://127.0.0.1:9632/metrics > "$SCRATCH/nvme-absent.prom"
kill $IW 2>/dev/null; wait $IW 2>/dev/null
grep '^iowarden_probe_active{probe="nvme"' $SCRATCH/nvme-absent.prom
ok "nvme probe inactive because the kernel has no module BTF, block programs active" \
  "grep -q '^iowarden_probe_active{probe=\"nvme\",reason=\"the kernel has no BTF for modules.*} 0' $SCRATCH/nvme-absent.prom && grep -q '^iowarden_probe_active{probe=\"block_rq_complete\",.*} 1' $SCRATCH/nvme-absent.prom"
