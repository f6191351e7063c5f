# vmtest-checks: 21
# vmtest-beside: yes
# iowarden knob on real cgroup v2 knobs: io.weight on a child cgroup,
# io.cost.qos / io.cost.model on nvme0n1; kill -9 during --hold, then
# `iowarden knob restore` puts the originals back byte-for-byte.
. "$(dirname "$0")/lib.sh"
if [ ! -x "$IOWARDEN_BIN" ]; then ok "iowarden binary at $IOWARDEN_BIN (run make build)" false; return 0 2>/dev/null || exit 0; fi
IW=$IOWARDEN_BIN
ST=$SCRATCH/knob-state; rm -rf $ST
grep -qw io $CG/cgroup.subtree_control || echo +io > $CG/cgroup.subtree_control
mkdir -p $CG/kn-a
K=$SCRATCH/knobs; mkdir -p $K
# Until iocost is first configured on a device its qos/model files have no
# line for it, and that state cannot be re-created from user space: start
# from a configured but disabled iocost (auto parameters).
grep -q "^$MM " $CG/io.cost.qos || echo "$MM enable=0 ctrl=auto" > $CG/io.cost.qos
echo "  io.cost.qos:   $(cat $CG/io.cost.qos)"
echo "  io.cost.model: $(cat $CG/io.cost.model)"

# cmp trusts st_size, which is 0 for cgroup files: compare what cat reads.
same() { cmp -s <(cat "$1") <(cat "$2"); }
wait_for() { # file grep-pattern
  for _ in $(seq 250); do grep -q -- "$2" "$1" && return 0; sleep 0.02; done; return 1
}
held_then_killed() { # name knob value expect-pattern
  local name=$1 knob=$2 value=$3 pat=$4
  cat $knob > $K/$name.orig
  "$IW" knob set $knob "$value" --hold 60 --state-dir $ST 2> $K/$name.set.log & local pid=$!
  wait_for $knob "$pat"; local changed=$?
  cat $knob > $K/$name.changed
  "$IW" knob get $knob > $K/$name.get 2>&1; local get_rc=$?
  kill -9 $pid; wait $pid 2>/dev/null
  cat $knob > $K/$name.after-kill
  "$IW" knob restore --state-dir $ST 2> $K/$name.restore.log; local rrc=$?
  echo "  $name: set '$value'; changed: $(head -c 160 $K/$name.changed | tr '\n' '|')"
  echo "  $name: restore said: $(cat $K/$name.restore.log)"
  ok "$name: set via iowarden ($value)" "[ $changed -eq 0 ]"
  ok "$name: knob get parses the kernel's output and prints it byte-for-byte" "[ $get_rc -eq 0 ] && same $K/$name.get $K/$name.changed"
  ok "$name: still changed after kill -9" "! same $K/$name.after-kill $K/$name.orig"
  ok "$name: knob restore says so and puts the original back byte-for-byte" \
     "[ $rrc -eq 0 ] && grep -q 'which did not exit cleanly' $K/$name.restore.log && [ \$(wc -l < $K/$name.restore.log) -eq 1 ] && same $knob $K/$name.orig"
}

held_then_killed io.weight $CG/kn-a/io.weight "default 300" "^default 300$"
held_then_killed io.cost.qos $CG/io.cost.qos "$MM enable=1 rpct=95 rlat=2000 wpct=95 wlat=5000 min=50 max=150" \
  "^$MM enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=5000 min=50.00 max=150.00$"
held_then_killed io.cost.model $CG/io.cost.model "$MM rbps=500000000 rseqiops=50000 rrandiops=40000 wbps=400000000 wseqiops=40000 wrandiops=30000" \
  "^$MM ctrl=user model=linear rbps=500000000 "

# SIGTERM during --hold: restored by the run itself.
cat $CG/kn-a/io.weight > $K/w.orig
"$IW" knob set $CG/kn-a/io.weight "$MM 77" --hold 60 --state-dir $ST 2> $K/term.log & P=$!
wait_for $CG/kn-a/io.weight "^$MM 77$"; c=$?
kill -TERM $P; wait $P; trc=$?
ok "io.weight per device: SIGTERM during --hold restores it" "[ $c -eq 0 ] && [ $trc -eq 0 ] && same $CG/kn-a/io.weight $K/w.orig"

# Malformed values: non-zero exit, clear message, knob unchanged.
cat $CG/io.cost.qos > $K/q.orig
"$IW" knob set $CG/io.cost.qos "$MM rpct=101" --state-dir $ST 2> $K/bad1.log; b1=$?
"$IW" knob set $CG/io.cost.qos "$MM min=200 max=100" --state-dir $ST 2> $K/bad2.log; b2=$?
"$IW" knob set $CG/kn-a/io.weight "default 0" --state-dir $ST 2> $K/bad3.log; b3=$?
cat $K/bad1.log $K/bad2.log $K/bad3.log | sed 's/^/  /'
ok "malformed io.cost.qos rpct=101: non-zero, message names field and range, unchanged" \
   "[ $b1 -ne 0 ] && grep -q 'rpct=101 out of range 0..=100' $K/bad1.log && same $CG/io.cost.qos $K/q.orig"
ok "io.cost.qos min > max refused" "[ $b2 -ne 0 ] && grep -q 'greater than max' $K/bad2.log && same $CG/io.cost.qos $K/q.orig"
ok "io.weight default 0 refused, unchanged" "[ $b3 -ne 0 ] && grep -q 'default=0 out of range 1..=10000' $K/bad3.log && same $CG/kn-a/io.weight $K/w.orig"
"$IW" knob set $CG/kn-gone/io.weight "default 50" --state-dir $ST 2> $K/gone.log; g=$?
ok "vanished cgroup: clear error" "[ $g -ne 0 ] && grep -q 'does not exist' $K/gone.log"
ok "nothing left in the journal" "[ -z \"\$(ls $ST 2>/dev/null)\" ]"

# Statistics files parse and print back byte-for-byte.
dd if=/dev/$DEV of=/dev/null bs=4k count=64 iflag=direct 2>/dev/null
# Statistics move between two reads: parse a copy of one read (same file name).
mkdir -p $K/copy
for f in $CG/io.stat $CG/kn-a/io.pressure $CG/io.pressure; do
  # A missing file fails its check (the count of checks is fixed).
  cat $f > $K/stat.raw; cp $K/stat.raw $K/copy/$(basename $f)
  "$IW" knob get $K/copy/$(basename $f) > $K/stat.get 2>&1; r=$?
  ok "knob get $f round-trips the kernel's text" "[ -e $f ] && [ $r -eq 0 ] && same $K/stat.get $K/stat.raw" || true
  same $K/stat.get $K/stat.raw || { echo "  kernel:"; sed 's/^/    /' $K/stat.raw; echo "  iowarden:"; sed 's/^/    /' $K/stat.get; }
done
rmdir $CG/kn-a
