# vmtest-checks: 2
# vmtest-beside: yes
# iowarden bench interrupted with SIGINT as from a terminal while io.cost is
# on (fairness --quick, io.cost only): it stops, says everything changed was
# restored, and qos, model, scheduler and cgroups are as before, with its
# partial report written and the journal empty. On every line: bench's own
# writes through this kernel's knobs (t-50 scores a whole run, on 6.1).
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
STATE=$SCRATCH/bench-int-state
rm -rf $SCRATCH/bench-int $STATE
bench_before
# Interrupted while io.cost is on: SIGINT as from a terminal.
"$IOWARDEN_BIN" bench --device $DEV --suite fairness --knobs io.cost --quick \
  --out $SCRATCH/bench-int --state-dir $STATE > /dev/null 2> $SCRATCH/bench-int.err &
B=$!
qos_wait "$MM" 'enable=1' 60
on=$(qos)
sleep 1
kill -INT $B; wait $B; irc=$?
tail -3 $SCRATCH/bench-int.err | sed 's/^/  /'
echo "  interrupted (rc $irc) with qos '$on'; after: $(bench_state)"
ok "bench: SIGINT mid-run stops it and restores everything" "echo \"\$on\" | grep -q 'enable=1' && [ $irc -ne 0 ] && grep -q 'everything changed was restored' $SCRATCH/bench-int.err && bench_restored && [ -s $SCRATCH/bench-int/report.json ]"
ok "bench: nothing left in the journal" "[ -z \"\$(ls $STATE 2>/dev/null)\" ]"
