#!/usr/bin/env bash
# The main job: builds weft (Release) if needed, builds a model with weft's symbolic API
# (default ResNet-18), saves its graph as MXNet JSON and replays it through the executor: plan,
# latency, top operators, a Chrome trace, the outputs and the weights used (out/). Idempotent.
#   scripts/run.sh [MODEL] [extra `weft replay` flags]      MODEL: weft model --list
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install_deps.sh"

build="$root/build-release"
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_TOOLS=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target weft_cli >/dev/null

model="${1:-resnet18}"
shift || true
out="$root/out"
mkdir -p "$out"
weft="$build/tools/weft"
# `weft model` prints the inputs to replay with, e.g. "--input data=1x3x224x224 ...".
inputs=$("$weft" model "$model" -o "$out/$model-symbol.json" | tee /dev/stderr | sed -n 's/^inputs: //p')
# shellcheck disable=SC2086  # $inputs is a list of flags on purpose
"$weft" replay "$out/$model-symbol.json" $inputs --seed 1 --warmup 2 --iters 10 \
  --save-params "$out/$model-0000.params" --save-outputs "$out/$model-outputs" \
  --profile "$out/$model-replay-trace.json" "$@"
