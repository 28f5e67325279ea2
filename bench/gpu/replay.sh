#!/usr/bin/env bash
# bench/run.sh gpu-replay: `weft replay --device cuda:0` against PyTorch on the same GPU running
# the same graph with the same weights (bench/gpu/torch_gpu_replay.py: the converter of the CPU
# replay benchmark, in its eager, channels_last and CUDA-graph forms; torch.compile with
# WEFT_GPU_REPLAY_FORMS=...,compile). Per model and batch, one line
#   compare gpu_replay_<model>_b<N>_<dtype> weft=<ms|n/a> torch_<form>=<ms>... ratio=<weft/best form>
# and a "#" line with weft's arena against torch.cuda.max_memory_allocated. 16-bit rows
# (bfloat16, float16) run `weft replay --dtype <dtype>` with the same float32 weights, cast once
# (BatchNorm parameters stay float32, docs/GPU.md "Reduced-precision replay"), and torch's
# module.to(<dtype>) of them.
# Env: WEFT_BIN (the weft program), WEFT_TORCH_PYTHON (python3 with torch), WEFT_MODELS_DIR,
# WEFT_GPU_REPLAY_MODELS (resnet50,mobilenetv2,inceptionv3), WEFT_GPU_REPLAY_BATCHES (1,32,256;
# --quick: 1,32), WEFT_GPU_REPLAY_DTYPES (float32,bfloat16; float16 too).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
weft="${WEFT_BIN:?set WEFT_BIN to the weft program}"
py="${WEFT_TORCH_PYTHON:-python3}"
models_dir="${WEFT_MODELS_DIR:-${repo}/../shared/models}"
quick=0
[[ "${1:-}" == --quick ]] && quick=1
models="${WEFT_GPU_REPLAY_MODELS:-resnet50,mobilenetv2,inceptionv3}"
default_batches="1,32,256"
[[ ${quick} -eq 1 ]] && default_batches="1,32"
batches="${WEFT_GPU_REPLAY_BATCHES:-${default_batches}}"
dtypes="${WEFT_GPU_REPLAY_DTYPES:-float32,bfloat16}"
forms="${WEFT_GPU_REPLAY_FORMS:-eager,channels_last,cuda_graph}"
warmup=3; iters=20
[[ ${quick} -eq 1 ]] && warmup=2 && iters=5
work="$(mktemp -d "${TMPDIR:-/tmp}/weft-gpu-replay.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

value_of() { sed -n "s/.*\\b$1=\\([0-9.eE+-][0-9.eE+-]*\\).*/\\1/p" "$2" | tail -n 1; }
echo "# gpu-replay: weft ${weft} vs torch $("${py}" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)" \
     "on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); models from ${models_dir}"
for model in ${models//,/ }; do
  file="$("${py}" "${repo}/bench/replay/models.py" file "${model}")" || continue
  graph="${models_dir}/${file}"
  for n in ${batches//,/ }; do
    case_dir="${work}/${model}_b${n}"
    mkdir -p "${case_dir}"
    mapfile -t specs < <("${py}" "${repo}/bench/replay/models.py" inputs "${model}" "${n}" "${case_dir}")
    weft_inputs=()
    for s in "${specs[@]}"; do weft_inputs+=(--input "${s}"); done
    params="${case_dir}/weights.params"
    log="${case_dir}/weft.log"
    weft_ms="n/a"; arena="n/a"
    if "${weft}" replay "${graph}" "${weft_inputs[@]}" --batch "${n}" --device cuda:0 --seed 1 \
         --save-params "${params}" --warmup "${warmup}" --iters "${iters}" --quiet >"${log}" 2>&1; then
      weft_ms="$(value_of 'replay median_ms' "${log}")"
      arena="$(sed -n 's/.*memory plan: arena \([0-9.]*\) MiB.*/\1/p' "${log}" | tail -n 1)"
    else
      echo "# weft replay ${model} b${n} failed: $(tail -n 2 "${log}" | tr '\n' ' ')"
      # The weights for the peer still come from the CPU replay.
      "${weft}" replay "${graph}" "${weft_inputs[@]}" --batch "${n}" --seed 1 --iters 1 \
        --save-params "${params}" --quiet >/dev/null 2>&1 || continue
    fi
    for dtype in ${dtypes//,/ }; do
      tlog="${case_dir}/torch_${dtype}.log"
      "${py}" "${here}/torch_gpu_replay.py" "${graph}" --params "${params}" "${weft_inputs[@]}" \
        --dtype "${dtype}" --forms "${forms}" --warmup "${warmup}" --iters "${iters}" >"${tlog}" 2>&1
      grep '^#' "${tlog}" || true
      torch_fields="$(grep -E '^torch_[a-z_]+=' "${tlog}" | grep -v max_memory | tr '\n' ' ')"
      best="$(grep -E '^torch_[a-z_]+=[0-9]' "${tlog}" | grep -v max_memory | cut -d= -f2 | sort -g | head -n 1)"
      w="${weft_ms}"
      if [[ "${dtype}" != float32 ]]; then
        w="n/a"
        dlog="${case_dir}/weft_${dtype}.log"
        if "${weft}" replay "${graph}" "${weft_inputs[@]}" --batch "${n}" --device cuda:0 \
             --params "${params}" --dtype "${dtype}" --warmup "${warmup}" --iters "${iters}" \
             --quiet >"${dlog}" 2>&1; then
          w="$(value_of 'replay median_ms' "${dlog}")"
        else
          echo "# weft replay ${model} b${n} ${dtype} failed: $(tail -n 2 "${dlog}" | tr '\n' ' ')"
        fi
      fi
      ratio="$(awk -v a="${w}" -v b="${best}" 'BEGIN { if (a == "n/a" || b == "" || b + 0 <= 0) print "n/a"; else printf "%.3f", a / b }')"
      echo "compare gpu_replay_${model}_b${n}_${dtype} weft=${w} ${torch_fields}ratio=${ratio}"
      echo "# memory ${model} b${n} ${dtype}: weft arena ${arena} MiB, torch max allocated $(value_of torch_max_memory_mb "${tlog}") MiB"
    done
  done
done
