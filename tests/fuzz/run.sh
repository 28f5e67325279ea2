#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 30). Exits non-zero
# on a crash or sanitizer report. Skips (exit 0) when clang is not installed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
seconds="${1:-30}"
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not installed; skipped"
  exit 0
fi
build="${WEFT_FUZZ_BUILD_DIR:-$here/../../build-fuzz}"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j 2
for target in params_fuzz; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s"
  log="$build/$target.log"
  rc=0
  "$build/$target" "$corpus" -max_total_time="$seconds" -malloc_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$build/$target-" >"$log" 2>&1 || rc=$?
  grep -E "stat::number_of_executed_units|^Done" "$log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $target failed (exit $rc); see $log and $build/$target-crash-*" >&2
    tail -40 "$log" >&2
    exit 1
  fi
done
