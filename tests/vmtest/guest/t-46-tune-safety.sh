# vmtest-checks: 7
# vmtest-beside: yes
# `iowarden tune` and `profile --apply` against real iocost on every kernel
# line: what they write, journal and restore through the kernel's knobs
# (t-45 measures the tuner's control loop, on one line; t-44 that its pin
# takes hold). kill -9 mid-run and the next iowarden restores the qos; bad
# input changes nothing; a protected cgroup vanishing mid-run stops the
# tuner, which restores; `profile --apply` writes exactly the model it
# measured.
. "$(dirname "$0")/lib.sh"
[ -x "$IOWARDEN_BIN" ] || { ok "iowarden binary at $IOWARDEN_BIN" false; return 0 2>/dev/null || exit 0; }
IW=$IOWARDEN_BIN
ST=$SCRATCH/tune-state; rm -rf $ST
T=$SCRATCH/tune-safety; rm -rf $T; mkdir -p $T
# Never judged here: no phase runs.
SLO=read-p99=5ms
echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/tn-lc
echo "$MM enable=0" > $CG/io.cost.qos
echo "$MM ctrl=auto" > $CG/io.cost.qos
pre_tune_qos=$(qos)
echo "  before: qos '$pre_tune_qos' model '$(model)'"

# Crash safety: kill -9 once it has written, then the next iowarden restores.
"$IW" tune --device $DEV --protect /tn-lc --slo $SLO --period 1s --start 50 \
  --listen 127.0.0.1:9624 --state-dir $ST > /dev/null 2> $T/crash.log & TP=$!
qos_wait "$MM" 'max=50.00' 10
crash_qos=$(qos)
kill -9 $TP; wait $TP 2>/dev/null
after_kill=$(qos)
"$IW" run --device $DEV --listen 127.0.0.1:9625 --duration 1s --state-dir $ST > /dev/null 2> $T/recover.log
echo "  crash: while tuning '$crash_qos'; after kill -9 '$after_kill'; after restart '$(qos)'"
sed 's/^/  /' $T/recover.log | grep -i restor
ok "tune: kill -9 leaves the change; the next iowarden run restores the qos" "echo \"\$after_kill\" | grep -q 'max=50.00' && [ \"\$(qos)\" = \"\$pre_tune_qos\" ] && grep -q 'restored' $T/recover.log"

# Bad input: a clear error and nothing changed.
bad() { # NAME EXPECTED-MESSAGE ARGS...
  local name=$1 want=$2; shift 2
  "$IW" tune "$@" --state-dir $ST --listen 127.0.0.1:9626 --duration 5s > /dev/null 2> $T/bad.log; local rc=$?
  echo "  $name: rc $rc: $(tail -1 $T/bad.log)"
  ok "tune: $name is refused, nothing changed" "[ $rc -ne 0 ] && grep -q \"$want\" $T/bad.log && [ \"\$(qos)\" = \"\$pre_tune_qos\" ]"
}
bad "a malformed SLO" "SLO 'read-p99=fast'" --device $DEV --protect /tn-lc --slo read-p99=fast
bad "an unknown device" "nvme9n9" --device nvme9n9 --protect /tn-lc --slo $SLO
bad "an unknown cgroup" "no cgroup /tn-nope" --device $DEV --protect /tn-nope --slo $SLO
bad "inverted bounds" "vrate-min 60 is above --vrate-max 40" --device $DEV --protect /tn-lc --slo $SLO --vrate-min 60 --vrate-max 40

# A protected cgroup that vanishes mid-run: the tuner stops, restores, says why.
mkdir -p $CG/tn-gone
"$IW" tune --device $DEV --protect /tn-gone --slo $SLO --period 1s --start 50 \
  --listen 127.0.0.1:9627 --state-dir $ST > /dev/null 2> $T/gone.log & TP=$!
qos_wait "$MM" 'max=50.00' 10
rmdir $CG/tn-gone
wait $TP; grc=$?
echo "  vanished: rc $grc: $(grep -i 'vanished' $T/gone.log | tail -1)"
ok "tune: a protected cgroup vanishing stops it with a clear error and restores" "[ $grc -ne 0 ] && grep -q 'protected cgroup /tn-gone vanished' $T/gone.log && [ \"\$(qos)\" = \"\$pre_tune_qos\" ]"

# profile: a short run on a scratch region, applied to io.cost.model, which
# then holds exactly the printed line: all six terms measured (t-47 judges
# the fit against the device's caps, not a profile).
"$IW" profile $DEV --duration 1s --offset 1G --size 256M --apply --state-dir $ST > $T/model.txt 2> $T/profile.log; prc=$?
sed 's/^/  /' $T/profile.log
echo "  profile: rc $prc: $(cat $T/model.txt)"
six_terms() { python3 -c '
import sys; kv = dict(t.split("=") for t in open(sys.argv[1]).read().split()[3:])
sys.exit(not (sorted(kv) == sorted("rbps rseqiops rrandiops wbps wseqiops wrandiops".split()) and all(int(v) > 0 for v in kv.values())))' "$1"; }
ok "profile --apply writes the measured model, six non-zero terms, to io.cost.model" "[ $prc -eq 0 ] && grep -q 'ctrl=user model=linear rbps=' $T/model.txt && six_terms $T/model.txt && [ \"\$(model)\" = \"\$(cat $T/model.txt)\" ]"

# Restore what this test itself set (the kernel keeps the device's line).
iocost_off $MM
rmdir $CG/tn-lc
echo "  after: qos '$(qos)' model '$(model)'"
