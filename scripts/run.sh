#!/usr/bin/env bash
# The main job: builds weft (Release) if needed and runs its most complete demonstration,
# writing a Chrome trace to out/demo_trace.json. Idempotent. Extra arguments go to `weft demo`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install_deps.sh"

build="$root/build-release"
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_TOOLS=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target weft_cli >/dev/null

mkdir -p "$root/out"
"$build/tools/weft" demo --size 1024 --tiles 16 --profile "$root/out/demo_trace.json" "$@"
