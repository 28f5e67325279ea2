#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 30). Exits non-zero
# on a crash or sanitizer report. Skips (exit 0) when clang is not installed.
#   WEFT_BUILD_DIR       built weft tree whose layer libraries graph_json_fuzz links (default: <repo>/build);
#                        without it graph_json_fuzz is skipped
#   WEFT_FUZZ_BUILD_DIR  where the fuzz targets are built (default: <repo>/build-fuzz)
#   WEFT_MODELS_DIR      graph files used as seeds (default: ../shared/models beside the checkout)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${1:-30}"
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not installed; skipped"
  exit 0
fi
build="${WEFT_FUZZ_BUILD_DIR:-$root/build-fuzz}"
weft_build="${WEFT_BUILD_DIR:-$root/build}"
models="${WEFT_MODELS_DIR:-$root/../shared/models}"
configure_log="$(cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_DIR="$weft_build" 2>&1)" || {
  echo "$configure_log" >&2
  exit 1
}
grep -E "fuzz: skipped" <<<"$configure_log" || true
cmake --build "$build" -j 2

for target in params_fuzz graph_json_fuzz; do
  if [ ! -x "$build/$target" ]; then
    echo "fuzz: $target not built; skipped"
    continue
  fi
  corpus="$build/corpus-$target"
  mkdir -p "$corpus"
  extra=()
  if [ "$target" = graph_json_fuzz ]; then
    # Seeds: the model files small enough to mutate quickly (read in place, never copied into the repo).
    seeds="$build/seeds-$target"
    rm -rf "$seeds"
    mkdir -p "$seeds"
    if [ -d "$models" ]; then
      find "$models" -maxdepth 1 -name '*.json' -size -64k -exec cp {} "$seeds/" \;
    fi
    extra=("$seeds" -dict="$here/graph_json.dict" -max_len=65536)
  fi
  echo "fuzz: $target for ${seconds}s"
  log="$build/$target.log"
  rc=0
  "$build/$target" "$corpus" "${extra[@]}" -max_total_time="$seconds" -malloc_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$build/$target-" >"$log" 2>&1 || rc=$?
  grep -E "stat::number_of_executed_units|^Done" "$log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $target failed (exit $rc); see $log and $build/$target-crash-*" >&2
    tail -40 "$log" >&2
    exit 1
  fi
done
