#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 30), then prints a
# table of executions per target (every target, or only the TARGETs named). Installs Debian's
# clang and libclang-rt-dev (libFuzzer's runtime) with apt-get when they are missing (through
# sudo when not root). Exits non-zero on a crash or sanitizer report, and when a target cannot be
# built: it never skips silently.
#   tests/fuzz/run.sh [SECONDS] [TARGET...]
#   WEFT_BUILD_DIR       built weft tree (not a WEFT_SANITIZE build) whose layer libraries the
#                        linked targets use (default: <repo>/build); its layer libraries are
#                        brought up to date first
#   WEFT_FUZZ_BUILD_DIR  where the fuzz targets are built (default: <repo>/build-fuzz)
#   WEFT_MODELS_DIR      graph files used as extra seeds (default: ../shared/models beside the checkout)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [SECONDS per target, a positive integer] [TARGET...]" >&2
  exit 2
fi
shift $(($# > 0 ? 1 : 0))
build="${WEFT_FUZZ_BUILD_DIR:-$root/build-fuzz}"
weft_build="${WEFT_BUILD_DIR:-$root/build}"
models="${WEFT_MODELS_DIR:-$root/../shared/models}"
all_targets=(params_fuzz params_ndarray_fuzz npy_fuzz graph_json_fuzz graph_bind_fuzz c_api_fuzz serve_body_fuzz
  recordio_fuzz)
targets=("${all_targets[@]}")
if [ $# -gt 0 ]; then
  targets=("$@")
  for target in "${targets[@]}"; do
    if ! [[ " ${all_targets[*]} " == *" $target "* ]]; then
      echo "fuzz: unknown target '$target' (targets: ${all_targets[*]})" >&2
      exit 2
    fi
  done
fi
mkdir -p "$build"

# ---- clang with libFuzzer ----------------------------------------------------------------------
can_fuzz() {
  command -v clang++ >/dev/null 2>&1 || return 1
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$build/probe.cc"
  clang++ -fsanitize=fuzzer,address,undefined "$build/probe.cc" -o "$build/probe" >/dev/null 2>&1
}
if ! can_fuzz; then
  echo "fuzz: clang++ with libFuzzer not found; installing clang and libclang-rt-dev with apt-get"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "fuzz: not root and no sudo: install clang and libclang-rt-dev, then run again" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev
  if ! can_fuzz; then
    echo "fuzz: clang++ still cannot link -fsanitize=fuzzer after installing; failing" >&2
    exit 1
  fi
fi

# ---- build -------------------------------------------------------------------------------------
if [ ! -f "$weft_build/CMakeCache.txt" ]; then
  echo "fuzz: $weft_build is not a configured weft build; configure and build weft there first" >&2
  echo "      (or point WEFT_BUILD_DIR at one)" >&2
  exit 1
fi
# The linked targets need weft's layer libraries, current with the sources.
cmake --build "$weft_build" -j 2 --target weft_graph weft_data
configure_log="$(cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_DIR="$weft_build" 2>&1)" || {
  echo "$configure_log" >&2
  exit 1
}
grep -E "fuzz: skipped" <<<"$configure_log" >&2 || true
cmake --build "$build" -j 2 --target "${targets[@]}"
for target in "${targets[@]}"; do
  if [ ! -x "$build/$target" ]; then
    echo "fuzz: $target was not built (see the configure messages above); failing" >&2
    exit 1
  fi
done

# ---- seeds -------------------------------------------------------------------------------------
seeds="$build/seeds"
rm -rf "$seeds"
python3 "$here/make_seeds.py" "$seeds"
mkdir -p "$seeds/models"
if [ -d "$models" ]; then
  # The model files small enough to mutate quickly (read in place, never copied into the repo).
  find "$models" -maxdepth 1 -name '*.json' -size -64k -exec cp {} "$seeds/models/" \;
fi

# ---- run ---------------------------------------------------------------------------------------
summary=()
for target in "${targets[@]}"; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus"
  case "$target" in
    params_fuzz | params_ndarray_fuzz) extra=("$seeds/params") ;;
    npy_fuzz) extra=("$seeds/npy") ;;
    graph_json_fuzz) extra=("$seeds/models" "$seeds/graph" -dict="$here/graph_json.dict" -max_len=65536) ;;
    graph_bind_fuzz) extra=("$seeds/graph" "$seeds/models" -dict="$here/graph_json.dict" -max_len=16384) ;;
    c_api_fuzz) extra=("$seeds/capi" -max_len=4096) ;;
    serve_body_fuzz) extra=("$seeds/serve" -max_len=8192) ;;
    recordio_fuzz) extra=("$seeds/recordio" -max_len=8192) ;;
  esac
  echo "fuzz: $target for ${seconds}s"
  log="$build/$target.log"
  rc=0
  "$build/$target" "$corpus" "${extra[@]}" -max_total_time="$seconds" -timeout=60 -malloc_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$build/$target-" >"$log" 2>&1 || rc=$?
  runs="$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $target failed (exit $rc) after $runs executions; see $log and $build/$target-crash-*" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  # UBSan continues after a report (the targets are built to recover); a report still fails.
  if grep -q "runtime error:" "$log"; then
    echo "fuzz: $target: UBSan report(s) in $log:" >&2
    grep -m 5 -A 3 "runtime error:" "$log" >&2
    exit 1
  fi
  summary+=("$(printf '%-22s %12s executions in %ss' "$target" "$runs" "$seconds")")
done
echo "fuzz: all targets ran clean"
printf '  %s\n' "${summary[@]}"
