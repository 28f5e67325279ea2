#!/usr/bin/env bash
# Input-pipeline benchmark, the "infinitely fast model": weft::data against PyTorch's DataLoader
# (torch_loader.py, Debian's PyTorch 1.13 and PIL) and tf.data (tf_loader.py) where TensorFlow is
# installed, on the same generated images, with a consumer that only takes batches.
#
#   bench/data/run.sh [--quick] [flags of weft_data_bench: --images N, --workloads jpeg,npy, ...]
#
# Workloads: jpeg (an image folder of 224x224 JPEGs, quality 90, 10 classes) and npy (the same
# images as 4 memory-mapped uint8 .npy shards + int32 labels). Pipeline on every side:
# shuffle(1024) -> [decode] -> random crop 200x200 -> resize 224x224 -> random flip ->
# to_tensor -> normalize (ImageNet) -> batch 64 (drop remainder) -> prefetch 2, with as many
# parallel workers as cores. 2048 images (--quick: 512), each side timed over whole epochs,
# >= 5 s and >= 2 epochs (--quick: >= 1 s, 1 epoch), each in its own process. Prints a table
# (samples/s, CPU, peak RSS, PSS), a run of weft with a consumer sleeping 80% of the batch
# period (prefetch overlap), a per-stage breakdown on one thread, and
#   compare data_<workload> weft=<samples/s> torch=<samples/s> ratio=<torch/weft>  (goal <= 0.8)
#
# Environment: WEFT_DATA_BENCH_BIN (default <repo>/build-bench/bench/data/weft_data_bench; the
# tree it is in is <bench build> below), WEFT_PYTHON (interpreter with torch, numpy and PIL;
# default /usr/bin/python3), WEFT_TF_PYTHON (interpreter with tensorflow; default
# <bench build>/tf-venv/bin/python; a full run (not --quick) without one tries once to download
# tensorflow-cpu with pip within 3 minutes and install it there, and remembers a failure in
# <bench build>/tf-venv.failed), WEFT_DATA_BENCH_FILES (the generated data, reused between runs;
# default <bench build>/data-bench-files). Installs python3-torch and python3-pil when missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
for arg in "$@"; do
  if [[ "${arg}" == -h || "${arg}" == --help ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 0
  fi
done
bin="${WEFT_DATA_BENCH_BIN:-${repo}/build-bench/bench/data/weft_data_bench}"
if [[ ! -x "${bin}" ]]; then
  echo "bench data: no ${bin}; run bench/run.sh data (it builds it)" >&2
  exit 1
fi
build="$(cd "$(dirname "${bin}")/../.." && pwd)"
python="${WEFT_PYTHON:-/usr/bin/python3}"
if ! "${python}" -c "import torch, numpy, PIL" 2>/dev/null; then
  echo "bench data: installing the peer (python3-torch, python3-pil)" >&2
  sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get install -y -qq python3-torch python3-pil >&2
fi

quick=0
has_dir=0
for arg in "$@"; do
  [[ "${arg}" == --quick ]] && quick=1
  [[ "${arg}" == --dir || "${arg}" == --dir=* ]] && has_dir=1
done

# The tf.data peer: optional, never worth a long wait.
tf_py="${WEFT_TF_PYTHON:-${build}/tf-venv/bin/python}"
tf_failed="${build}/tf-venv.failed"
tf_args=()
if [[ -x "${tf_py}" ]] && "${tf_py}" -c "import tensorflow" >/dev/null 2>&1; then
  tf_args=(--tf-python "${tf_py}")
elif [[ -n "${WEFT_TF_PYTHON:-}" ]]; then
  tf_args=(--tf-missing "WEFT_TF_PYTHON=${WEFT_TF_PYTHON} cannot import tensorflow")
elif [[ -f "${tf_failed}" ]]; then
  tf_args=(--tf-missing "$(head -n 1 "${tf_failed}"); delete ${tf_failed} to try again")
elif [[ ${quick} -eq 1 ]]; then
  tf_args=(--tf-missing "no ${tf_py}; a run without --quick tries to install tensorflow-cpu")
else
  echo "bench data: trying to install tensorflow-cpu into ${build}/tf-venv (tf.data peer)" >&2
  download="$(mktemp -d)"
  reason=""
  if ! timeout 180 "${python}" -m pip download -q --no-deps tensorflow-cpu -d "${download}" >&2; then
    reason="pip download --no-deps tensorflow-cpu failed or took over 180 s"
  elif ! "${python}" -m venv "${build}/tf-venv" >&2 ||
       ! timeout 600 "${build}/tf-venv/bin/pip" install -q "${download}"/tensorflow_cpu-*.whl >&2 ||
       ! "${tf_py}" -c "import tensorflow" >/dev/null 2>&1; then
    reason="installing tensorflow-cpu and its dependencies into ${build}/tf-venv failed"
    rm -rf "${build}/tf-venv"
  fi
  rm -rf "${download}"
  if [[ -z "${reason}" ]]; then
    tf_args=(--tf-python "${tf_py}")
  else
    echo "${reason}" >"${tf_failed}"
    tf_args=(--tf-missing "${reason}")
  fi
fi

dir_args=()
if [[ ${has_dir} -eq 0 ]]; then
  dir_args=(--dir "${WEFT_DATA_BENCH_FILES:-${build}/data-bench-files}")
fi
exec "${bin}" --python "${python}" --script-dir "${here}" "${tf_args[@]}" "${dir_args[@]}" "$@"
