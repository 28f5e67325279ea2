#!/usr/bin/env bash
# The main job: builds weft (Release) if needed, builds a model with weft's symbolic API
# (default ResNet-18), saves its graph as MXNet JSON and replays it through the executor: plan,
# latency, top operators, a Chrome trace, the outputs and the weights used (out/). Idempotent.
#   scripts/run.sh [MODEL] [extra `weft replay` flags]      MODEL: weft model --list
#   WEFT_USE_CUDA   AUTO, ON or OFF. Unset: the CUDA kernels are built only when a GPU is visible
#                   (nvidia-smi lists one), since the main job runs on the CPU otherwise and
#                   compiling them is most of a fresh build. scripts/test.sh always builds them.
#   WEFT_JOBS       parallel build jobs (default: number of cores)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$SECONDS
say() { echo "run.sh [$((SECONDS - start)) s]: $*" >&2; }

say "checking Debian packages (scripts/install_deps.sh)"
"$root/scripts/install_deps.sh"

build="$root/build-release"
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then generator=(-G Ninja); fi
cuda="${WEFT_USE_CUDA:-}"
if [ -z "$cuda" ]; then
  cuda=OFF
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    cuda=AUTO
  fi
fi
say "configuring $build (Release, CUDA kernels: $cuda)"
mkdir -p "$build"
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
       -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_TOOLS=ON -DWEFT_USE_CUDA="$cuda" \
       >"$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  exit 1
fi
say "building the weft tool (a fresh tree takes minutes; progress below)"
cmake --build "$build" -j "${WEFT_JOBS:-$(nproc)}" --target weft_cli >&2
say "built"

model="${1:-resnet18}"
shift || true
out="$root/out"
mkdir -p "$out"
weft="$build/tools/weft"
# `weft model` prints the inputs to replay with, e.g. "--input data=1x3x224x224 ...". Its output
# is shown on stderr by printf, not by reopening /dev/stderr (which truncates a redirected log).
model_report=$("$weft" model "$model" -o "$out/$model-symbol.json")
printf '%s\n' "$model_report" >&2
inputs=$(sed -n 's/^inputs: //p' <<<"$model_report")
say "replaying $out/$model-symbol.json"
# shellcheck disable=SC2086  # $inputs is a list of flags on purpose
"$weft" replay "$out/$model-symbol.json" $inputs --seed 1 --warmup 2 --iters 10 \
  --save-params "$out/$model-0000.params" --save-outputs "$out/$model-outputs" \
  --profile "$out/$model-replay-trace.json" "$@"
say "done"
