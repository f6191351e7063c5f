#!/bin/bash
# stages.sh 'NAME=COMMAND' ...: make test's stages in order. Stops at the
# first that fails, and either way ends with the time each stage took, so a
# run that grows says where (CI's limit is on the sum).
set -uo pipefail
names=() secs=()
summary() {
  local i total=0
  echo "time per stage:"
  for i in "${!names[@]}"; do
    printf '  %-12s %4d s\n' "${names[$i]}" "${secs[$i]}"
    total=$((total + secs[i]))
  done
  printf '  %-12s %4d s (%d min)\n' total "$total" $(((total + 59) / 60))
}
for stage in "$@"; do
  name=${stage%%=*} cmd=${stage#*=}
  start=$(date +%s)
  bash -c "$cmd"; rc=$?
  names+=("$name"); secs+=($(($(date +%s) - start)))
  if ((rc != 0)); then
    summary
    echo "stage '$name' failed (exit status $rc): $cmd" >&2
    exit "$rc"
  fi
done
summary
