#!/usr/bin/env bash
# Runs tests/dist/failure_check in each mode under mpirun and checks that every surviving rank
# printed "ok". Usage: failure_check.sh MPIEXEC FAILURE_CHECK_BINARY
set -uo pipefail
mpiexec="$1"
bin="$2"
flags=(--allow-run-as-root --oversubscribe --mca orte_abort_on_non_zero_status 0)
export WEFT_DIST_TIMEOUT=2
passed=0
failed=0
run() {  # mode np expected-ok-ranks...
  local mode="$1" np="$2"
  shift 2
  local out
  out="$(timeout 120 "$mpiexec" "${flags[@]}" -np "$np" "$bin" "$mode" 2>&1)"
  echo "$out" | grep "failure_check"
  local ok=1
  for r in "$@"; do
    # A here-string, not `echo | grep -q`: grep -q exits at the first match, and under pipefail
    # the echo that then dies of SIGPIPE (a long output) failed the check of a rank that passed.
    if ! grep -q "failure_check $mode: rank $r ok" <<<"$out"; then
      echo "failure_check $mode: rank $r did not report ok"
      ok=0
    fi
  done
  if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "$out" | tail -20; fi
}
run mismatch 2 0 1
run hang 3 0 1 2
run kill 3 0 2
run nccl_kill 2 0  # reports ok, skipped, without NCCL or a GPU per process
echo "${passed} passed, ${failed} failed"
[ "$failed" = 0 ]
