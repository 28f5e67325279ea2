#!/usr/bin/env bash
# bench/run.sh gpu: weft_gpu_bench and bench/gpu/torch_gpu.py on the same GPU, one after the
# other, then "compare gpu_<workload> weft=<x> torch=<y> ratio=<weft/torch>" per workload.
# WEFT_GPU_BENCH_BIN: the benchmark binary; WEFT_TORCH_PYTHON: the interpreter with torch (python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${WEFT_GPU_BENCH_BIN:?set WEFT_GPU_BENCH_BIN}"
py="${WEFT_TORCH_PYTHON:-python3}"
weft_out="$("${bin}" "$@")"
echo "${weft_out}" | grep '^#' || true
if ! torch_out="$("${py}" "${here}/torch_gpu.py" "$@" 2>&1)"; then
  echo "# PyTorch peer failed: ${torch_out}" | tail -3
  torch_out=""
fi
echo "# weft: ${bin}; peer: torch $("${py}" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
while read -r key value; do
  [[ "${key}" == gpu_* ]] || continue
  w="${value#weft=}"
  t="$(echo "${torch_out}" | awk -v k="${key}" '$1 == k { sub("torch=", "", $2); print $2 }')"
  if [[ -n "${t}" ]]; then
    ratio="$(awk -v a="${w}" -v b="${t}" 'BEGIN { printf "%.3f", a / b }')"
    echo "compare ${key} weft=${w} torch=${t} ratio=${ratio}"
  else
    echo "compare ${key} weft=${w} torch=none"
  fi
done <<< "${weft_out}"
