#!/usr/bin/env bash
# Replay benchmark: `weft replay` against PyTorch (CPU) running the same graph with the same weights
# and the same input, for ResNet-50, MobileNetV2 and Inception-v3 at batch 1 and 32.
#
#   bench/replay/run.sh [--quick] [--models resnet50,mobilenetv2,inceptionv3] [--batches "1 32"]
#                       [--warmup W] [--iters K] [--keep DIR]
#
# Per model and batch N:
#   1. input.npy: uniform [-1, 1), (N, 3, S, S), written with NumPy (seed 1); both tools read it.
#   2. weft replay GRAPH --input data=input.npy --batch N --seed 1 --save-params P --save-outputs DW
#      --warmup W --iters K: weft draws the weights from the seed and writes them to P; its line
#      `replay median_ms=<ms>` gives the time.
#   3. torch_replay.py GRAPH --params P --input data=input.npy --batch N --save-outputs DT ...:
#      PyTorch runs the graph built from the JSON with P's weights; `torch_ms=<ms>`.
#   4. The heads are compared (max abs and max relative difference), and so are the logits: both
#      tools run once more on a copy of the graph whose heads also list the softmax inputs
#      (random weights saturate ResNet-50's and MobileNetV2's softmax into one-hot vectors).
#   5. `compare replay_<model>_b<N> weft=<ms> torch=<ms> ratio=<weft/torch>`.
#
# stdout carries "# ..." detail lines and the compare lines; the tools' own output goes to logs in
# the work directory (shown on failure). Exit status 1 when a run failed or outputs disagreed
# (relative difference above 1e-3 of the largest magnitude).
#
# Environment: WEFT_BIN (default <repo>/build/tools/weft), WEFT_MODELS_DIR (default
# <repo>/../shared/models), WEFT_PYTHON (an interpreter that imports torch and numpy; default: the
# first of python3 and /usr/bin/python3 that does), WEFT_TORCH_THREADS / WEFT_TORCH_MODE (see
# torch_replay.py; PyTorch uses 2 threads and picks its fastest compiled form by default).
#
# Times are only meaningful on an otherwise idle machine: both sides use every core, and
# PyTorch's OpenMP regions in particular slow down many-fold when other processes compete.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
weft="${WEFT_BIN:-${repo}/build/tools/weft}"
models_dir="${WEFT_MODELS_DIR:-${repo}/../shared/models}"

quick=0
models="resnet50,mobilenetv2,inceptionv3"
batches=""
warmup=""
iters=""
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --models) models="$2"; shift ;;
    --batches) batches="$2"; shift ;;
    --warmup) warmup="$2"; shift ;;
    --iters) iters="$2"; shift ;;
    --keep) keep="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bench replay: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "${batches}" ]]; then
  if [[ ${quick} -eq 1 ]]; then batches="1"; else batches="1 32"; fi
fi

# The interpreter: Debian's python3-torch/python3-numpy live in /usr/lib/python3/dist-packages,
# which a python3 earlier on PATH (pyenv, a venv) does not see.
python="${WEFT_PYTHON:-}"
if [[ -z "${python}" ]]; then
  for p in python3 /usr/bin/python3; do
    if command -v "${p}" >/dev/null 2>&1 && "${p}" -c "import torch, numpy" >/dev/null 2>&1; then
      python="${p}"
      break
    fi
  done
fi
if [[ -z "${python}" ]]; then
  echo "bench replay: no python3 imports torch and numpy; install the peer: apt-get install python3-torch" >&2
  exit 1
fi
if [[ ! -x "${weft}" ]]; then
  echo "bench replay: ${weft} is not an executable (build the weft_cli target or set WEFT_BIN)" >&2
  exit 1
fi

model_file() {
  case "$1" in
    resnet50) echo "pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json" ;;
    mobilenetv2) echo "KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json" ;;
    inceptionv3) echo "soeaver__mxnet-model__inception_v3-symbol.json" ;;
    *) return 1 ;;
  esac
}
model_size() {
  case "$1" in
    inceptionv3) echo 299 ;;
    *) echo 224 ;;
  esac
}

if [[ -n "${keep}" ]]; then
  work="${keep}"
  mkdir -p "${work}"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/weft-replay-bench.XXXXXX")"
  trap 'rm -rf "${work}"' EXIT
fi

torch_version="$("${python}" -c "import torch; print(torch.__version__)")"
echo "# replay: weft ${weft} vs PyTorch ${torch_version} (${python}), $(nproc 2>/dev/null || echo '?') CPU cores;" \
     "models from ${models_dir}"

status=0
show_log() {
  echo "bench replay: $1 failed; last lines of $2:" >&2
  tail -n 20 "$2" >&2 || true
}

# Prints "max_abs=... max_rel=... argmax=..." for head K of two output directories, or "MISMATCH..."
# (and exit status 1) when the relative difference is above the tolerance.
compare_heads() {
  "${python}" - "$1" "$2" "$3" <<'EOF'
import sys
import numpy as np
a_dir, b_dir, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = np.load(f"{a_dir}/{k}.npy").astype(np.float64)
b = np.load(f"{b_dir}/{k}.npy").astype(np.float64)
if a.shape != b.shape:
    print(f"MISMATCH shape weft {a.shape} torch {b.shape}")
    sys.exit(1)
diff = np.abs(a - b)
scale = max(np.abs(b).max(), 1e-30)
rel = diff.max() / scale
words = f"max_abs={diff.max():.3g} max_rel={rel:.3g}"
if a.ndim == 2:
    agree = (a.argmax(1) == b.argmax(1)).mean()
    words += f" argmax_agree={agree:.2f}"
if not np.isfinite(a).all() or rel > 1e-3:
    print("MISMATCH " + words)
    sys.exit(1)
print(words)
EOF
}

if [[ ${quick} -eq 1 ]]; then
  w1="${warmup:-1}"; i1="${iters:-3}"; w32="${warmup:-1}"; i32="${iters:-2}"
else
  w1="${warmup:-3}"; i1="${iters:-20}"; w32="${warmup:-1}"; i32="${iters:-5}"
fi

IFS=',' read -r -a model_list <<<"${models}"
for m in "${model_list[@]}"; do
  if ! file="$(model_file "${m}")"; then
    echo "bench replay: unknown model '${m}' (resnet50, mobilenetv2, inceptionv3)" >&2
    exit 2
  fi
  graph="${models_dir}/${file}"
  if [[ ! -f "${graph}" ]]; then
    echo "bench replay: ${graph} not found (set WEFT_MODELS_DIR)" >&2
    exit 1
  fi
  size="$(model_size "${m}")"
  logits_graph="${work}/${m}-logits.json"
  "${python}" "${here}/mxnet_to_torch.py" logits-graph "${graph}" "${logits_graph}"
  for n in ${batches}; do
    if [[ "${n}" -eq 1 ]]; then w="${w1}"; k="${i1}"; else w="${w32}"; k="${i32}"; fi
    tag="replay_${m}_b${n}"
    dir="${work}/${tag}"
    mkdir -p "${dir}"
    input="${dir}/input.npy"
    params="${dir}/weights.params"
    "${python}" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(1).uniform(-1, 1, \
(${n}, 3, ${size}, ${size})).astype(np.float32))" "${input}"

    if ! "${weft}" replay "${graph}" --input "data=${input}" --batch "${n}" --seed 1 --save-params "${params}" \
         --save-outputs "${dir}/weft" --warmup "${w}" --iters "${k}" --quiet >"${dir}/weft.log" 2>&1; then
      show_log "weft replay (${tag})" "${dir}/weft.log"; status=1; continue
    fi
    weft_ms="$(sed -n 's/^replay median_ms=\([0-9.eE+-]*\).*/\1/p' "${dir}/weft.log" | tail -n 1)"
    if ! "${python}" "${here}/torch_replay.py" "${graph}" --params "${params}" --input "data=${input}" \
         --batch "${n}" --warmup "${w}" --iters "${k}" --save-outputs "${dir}/torch" >"${dir}/torch.log" 2>&1; then
      show_log "torch_replay (${tag})" "${dir}/torch.log"; status=1; continue
    fi
    torch_ms="$(sed -n 's/^torch_ms=\([0-9.eE+-]*\).*/\1/p' "${dir}/torch.log" | tail -n 1)"
    torch_mode="$(sed -n 's/.*mode=\([^,]*\),.*/\1/p' "${dir}/torch.log" | tail -n 1)"
    if [[ -z "${weft_ms}" || -z "${torch_ms}" ]]; then
      echo "bench replay: ${tag}: no time in the logs (expected 'replay median_ms=' and 'torch_ms=')" >&2
      show_log "timing (${tag})" "${dir}/weft.log"; status=1; continue
    fi

    # Outputs: the head from the timed runs, then the logits from one run of each on the copy.
    check="head0 "
    if ! check+="$(compare_heads "${dir}/weft" "${dir}/torch" 0)"; then status=1; fi
    if "${weft}" replay "${logits_graph}" --params "${params}" --input "data=${input}" --batch "${n}" \
         --save-outputs "${dir}/weft_logits" --warmup 0 --iters 1 --quiet >"${dir}/weft_logits.log" 2>&1 &&
       "${python}" "${here}/torch_replay.py" "${logits_graph}" --params "${params}" --input "data=${input}" \
         --batch "${n}" --mode eager --warmup 0 --iters 1 --save-outputs "${dir}/torch_logits" \
         >"${dir}/torch_logits.log" 2>&1; then
      if [[ -f "${dir}/torch_logits/1.npy" ]]; then
        check+="; logits "
        if ! check+="$(compare_heads "${dir}/weft_logits" "${dir}/torch_logits" 1)"; then status=1; fi
      fi
    else
      show_log "the logits run (${tag})" "${dir}/weft_logits.log"
      [[ -f "${dir}/torch_logits.log" ]] && tail -n 5 "${dir}/torch_logits.log" >&2
      status=1
    fi
    echo "# ${tag}: weft iters=${k} warmup=${w}; torch mode=${torch_mode}; ${check}"
    ratio="$(awk -v a="${weft_ms}" -v b="${torch_ms}" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')"
    echo "compare ${tag} weft=${weft_ms} torch=${torch_ms} ratio=${ratio}"
    [[ -n "${keep}" ]] || rm -f "${params}"
  done
done
exit "${status}"
