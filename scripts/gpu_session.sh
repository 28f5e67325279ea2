#!/usr/bin/env bash
# On the lent GPU machine, in one call: sets up the dependencies (scripts/gpu_env.sh), takes the
# binaries from .gpu/bundle.tar.xz when they run there (made here by scripts/gpu_bundle.sh),
# else builds them (scripts/gpu_build.sh), then runs every GPU suite and bench/gpu against
# PyTorch (scripts/gpu_test.sh --bench), the tiny-op figures with one and four compute streams,
# the measured convolution algorithms, and the executor's replay against PyTorch (bench/gpu/
# replay.sh --quick). Logs and $OUT/summary.txt come back; the summary is printed last.
#   bash scripts/gpu_session.sh            (with .gpu carried)
set -uo pipefail
out=${OUT:-/tmp/weft-gpu}
mkdir -p "$out"
export OUT=$out PYTHONUNBUFFERED=1
t0=$(date +%s)
log() { echo "== $*" | tee -a "$out/summary.txt"; }
source scripts/gpu_env.sh || { log "dependency setup failed"; exit 1; }
log "device: $(cat "$out/device.txt"); cudnn: ${cudnn_root:-toolkit}"

prebuilt=no
if [ -f .gpu/bundle.tar.xz ]; then
  rm -rf build-gpu && mkdir -p build-gpu && tar -C build-gpu -xJf .gpu/bundle.tar.xz
  missing=$(ldd build-gpu/tests/weft_ops_tests build-gpu/tests/weft_gpu_tests 2>&1 | grep "not found" | sort -u)
  if [ -z "$missing" ] && build-gpu/tests/weft_devices_tests --gtest_list_tests > /dev/null 2>&1; then
    prebuilt=yes
    log "prebuilt binaries of $(head -1 build-gpu/COMMIT) (uncommitted: $(($(wc -l < build-gpu/COMMIT) - 1)) paths)"
  else
    log "prebuilt binaries do not run here: ${missing:-they fail to start}; building"
    rm -rf build-gpu
  fi
fi
if [ $prebuilt = no ]; then
  bash scripts/gpu_build.sh weft_gpu_engine_tests weft_gpu_tests weft_ops_tests weft_devices_tests \
    weft_memory_tests weft_cli weft_gpu_bench || exit 1
fi
[ -d build-gpu/models ] && export WEFT_MODELS_DIR=$PWD/build-gpu/models
[ -d .gpu/models ] && export WEFT_MODELS_DIR=$PWD/.gpu/models
log "ready after $(( $(date +%s) - t0 )) s; models: ${WEFT_MODELS_DIR:-none}"
bash scripts/gpu_test.sh --bench
for streams in 1 4; do
  WEFT_GPU_STREAMS=$streams timeout 60 build-gpu/bench/gpu/weft_gpu_bench --quick 2>&1 |
    grep -E "tiny|chain" | sed "s/^/streams=$streams: /" | tee -a "$out/summary.txt"
done
# cuDNN's convolution algorithm measured instead of by its heuristics (Note [cuDNN algorithm
# choice]), and everything on one compute stream.
WEFT_CUDNN_ALGO=measure timeout 60 build-gpu/bench/gpu/weft_gpu_bench --quick 2>&1 |
  grep -E "conv" | sed "s/^/measured: /" | tee -a "$out/summary.txt"
WEFT_GPU_STREAMS=1 timeout 60 build-gpu/bench/gpu/weft_gpu_bench --quick 2>&1 |
  grep -E "conv|matmul" | sed "s/^/streams=1: /" | tee -a "$out/summary.txt"
# The graph executor on cuda:0 against PyTorch's forms (bench/run.sh gpu-replay), quick; first
# ResNet-50 replayed on the GPU (captured, eager, bf16, fp16) against the CPU's saved outputs.
if [ -n "${WEFT_MODELS_DIR:-}" ]; then
  r50="$WEFT_MODELS_DIR/pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json"
  build-gpu/tools/weft replay "$r50" --input data=1x3x224x224 --seed 3 --iters 1 --quiet \
    --save-outputs "$out/r50_cpu" > "$out/r50_cpu.txt" 2>&1
  for flags in "" "--no-cuda-graph" "--streams 1" "--dtype bf16" "--dtype fp16"; do
    # shellcheck disable=SC2086
    build-gpu/tools/weft replay "$r50" --input data=1x3x224x224 --seed 3 --device cuda:0 \
      --iters 20 --quiet --compare "$out/r50_cpu" $flags > "$out/r50_gpu.txt" 2>&1
    echo "resnet50 cuda:0 ${flags:-(default)}: rc=$? $(grep -E 'median_ms|cuda graph|streams:|heads|differs' \
      "$out/r50_gpu.txt" | tr '\n' ' ')" | tee -a "$out/summary.txt"
  done
  WEFT_BIN=build-gpu/tools/weft timeout 300 bash bench/gpu/replay.sh --quick > "$out/gpu_replay.txt" 2>&1
  grep -E "^compare|failed" "$out/gpu_replay.txt" | tee -a "$out/summary.txt"
fi
log "done after $(( $(date +%s) - t0 )) s"
echo; echo "==== summary"; cat "$out/summary.txt"
