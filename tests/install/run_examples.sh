#!/usr/bin/env bash
# Runs the README's examples (built by tests/install against the installed package) N times each
# while a CPU-burning process competes for the cores, and fails on any non-zero exit or signal.
# A program that never calls weft::shutdown() must exit cleanly every time (docs/LIFETIMES.md).
#
#   tests/install/run_examples.sh BUILD_DIR [N]     (N defaults to 40)
set -uo pipefail
build="${1:?usage: run_examples.sh BUILD_DIR [N]}"
runs="${2:-40}"
examples=(readme_ndarray readme_graph readme_engine weft_consumer)
for example in "${examples[@]}"; do
  if [ ! -x "$build/$example" ]; then
    echo "run_examples: $build/$example is missing (build tests/install first)" >&2
    exit 2
  fi
done

# The load: one busy loop per core, so that the examples' threads are descheduled at arbitrary
# points (the exit crash this guards against showed up about once in 40 runs under such load).
burners=()
cores="$(nproc 2>/dev/null || echo 2)"
for ((i = 0; i < cores; ++i)); do
  ( while :; do :; done ) &
  burners+=($!)
done
cleanup() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

workdir="$(mktemp -d)"
trap 'cleanup; rm -rf "$workdir"' EXIT
failed=0
for example in "${examples[@]}"; do
  bad=0
  for ((run = 1; run <= runs; ++run)); do
    log="$workdir/$example.log"
    args=()
    [ "$example" = readme_ndarray ] && args=("$workdir/w.params")
    # A hang is a failure too: 300 s is far beyond any example's run time under load.
    timeout -k 10 300 "$build/$example" "${args[@]}" >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
      if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        why="timed out (hang)"
      elif [ "$rc" -gt 128 ]; then
        why="killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null || echo '?'))"
      else
        why="exit status $rc"
      fi
      echo "run_examples: $example run $run/$runs: $why" >&2
      tail -n 20 "$log" >&2
      bad=$((bad + 1))
    fi
  done
  echo "run_examples: $example: $((runs - bad))/$runs clean runs"
  [ "$bad" -ne 0 ] && failed=1
done
exit "$failed"
