#!/usr/bin/env bash
# Installs what is missing, configures, builds and runs every test suite. Idempotent.
#   WEFT_BUILD_DIR  build directory (default: <repo>/build)
#   WEFT_JOBS       parallel build jobs (default: number of cores)
#   WEFT_DEBUG_INFO full (default) or lines
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install_deps.sh"

build="${WEFT_BUILD_DIR:-$root/build}"
jobs="${WEFT_JOBS:-$(nproc)}"
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then generator=(-G Ninja); fi

# WEFT_DEBUG_INFO=lines: line tables only (-g1) instead of full debug info; CI uses it (about a
# fifth less compile time, objects a sixth the size, faster links and install). Stack traces
# still name file and line.
debug_info=()
if [ "${WEFT_DEBUG_INFO:-full}" = lines ]; then
  debug_info=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
              "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG -Xcompiler=-g1")
fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_TOOLS=ON "${debug_info[@]}"
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j 2 --timeout 300
"$root/scripts/python_test.sh" "$build"
"$root/scripts/dist_test.sh" "$build"
