#!/usr/bin/env bash
# On the lent GPU machine, after scripts/gpu_build.sh: runs every GPU suite (the engine's GPU
# pools, NDArray on cuda:0, the CUDA kernels against the CPU kernels, the CUDA DeviceAPI and the
# device pool) and, with --bench, bench/gpu against PyTorch. One log per suite in $OUT and a
# summary line each in $OUT/summary.txt.
set -uo pipefail
out=${OUT:-/tmp/weft-gpu}
mkdir -p "$out"
b=build-gpu
run() {  # name, command...
  local name=$1
  shift
  local start=$(date +%s)
  timeout 150 "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local tally
  tally=$(grep -E "^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?[,.]" "$out/$name.log" | tr '\n' ' ')
  echo "== $name rc=$rc $(( $(date +%s) - start ))s $tally" | tee -a "$out/summary.txt"
  grep -E "^\[  FAILED  \] " "$out/$name.log" | sort -u | head -40 | tee -a "$out/summary.txt"
}
run gpu_engine "$b/tests/weft_gpu_engine_tests"
run gpu_ndarray "$b/tests/weft_gpu_tests"
run cuda_ops "$b/tests/weft_ops_tests" --gtest_filter='*Cuda*:*cuda*'
run devices "$b/tests/weft_devices_tests"
run memory "$b/tests/memory/weft_memory_tests"
"$b/tools/weft" ops --backward > "$out/ops_listing.txt" 2>&1
echo "== weft ops: $(grep -c 'kernels: cpu cuda' "$out/ops_listing.txt") ops (backward ones included) list 'kernels: cpu cuda' of $(grep -c 'kernels:' "$out/ops_listing.txt")" | tee -a "$out/summary.txt"
if [ "${1:-}" = --bench ]; then
  WEFT_GPU_BENCH_BIN=$b/bench/gpu/weft_gpu_bench timeout 240 bash bench/gpu/run.sh > "$out/bench_gpu.txt" 2>&1
  cat "$out/bench_gpu.txt" | tee -a "$out/summary.txt"
fi
