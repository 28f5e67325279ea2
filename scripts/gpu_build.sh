#!/usr/bin/env bash
# Builds weft with CUDA on the lent GPU machine (bare, offline) and runs the GPU test suites.
# Run there, from the repository root, with `.gpu` carried (see docs/GPU.md, "Running on a GPU
# machine"): bash scripts/gpu_build.sh [targets...]. Logs go to $OUT (or /tmp/weft-gpu).
#
# Prepared here, once per session: ../shared/gpu/fetch-debs.sh .gpu/debs and
# cp ../shared/gpu/unpack-debs.sh .gpu/ (oneDNN, GoogleTest, nlohmann-json, CLI11 as Debian
# packages, unpacked into a prefix there; cuDNN comes from the machine's PyTorch wheel).
set -uo pipefail
out=${OUT:-/tmp/weft-gpu}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/summary.txt"; }

source scripts/gpu_env.sh || exit 1
log "device: $(cat "$out/device.txt"); nvcc: $(nvcc --version | tail -1); cudnn root: ${cudnn_root:-toolkit}"

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DWEFT_USE_CUDA=ON -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON \
  ${cudnn_root:+-DCUDNN_ROOT=$cudnn_root} > "$out/configure.log" 2>&1 ||
  { log "configure failed"; tail -30 "$out/configure.log"; exit 1; }
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(all)
start=$(date +%s)
if ! cmake --build build-gpu -j 16 --target "${targets[@]}" > "$out/build.log" 2>&1; then
  log "build failed"
  grep -E "error|Error" "$out/build.log" | head -40
  exit 1
fi
log "build: $(( $(date +%s) - start )) s"
