#!/usr/bin/env bash
# Replay benchmark: `weft replay` against MXNet 1.9.1 and PyTorch (CPU), both running the same
# graph JSON with the same weights and the same inputs, for every MXNet symbol file of
# ../shared/models at batch 1 and the three big CNNs (resnet50, mobilenetv2, inceptionv3) also at
# batch 32.
#
#   bench/replay/run.sh [--quick] [--contended] [--models NAME,...] [--batches "1 32"]
#                       [--warmup W] [--iters K] [--keep DIR]
#
# Models (short names; bench/replay/models.py maps them to files and inputs): resnet50,
# mobilenetv2, inceptionv3, squeezenet, mtcnn_pnet, crnn, gluon_mlp, mxnet_mlp, se_resnext50,
# vgg16_reduced, retinaface, resnet18, mobilefacenet, char_lstm (the TVM graph-executor files
# are not MXNet symbols). --batches applies to every model named; without it each model runs at
# batch 1 and the big CNNs at 32 too. --quick: mobilenetv2 and squeezenet at batch 1 (unless
# --models/--batches say otherwise), 1 warm-up + 3 runs. Defaults: batch 1 3 warm-up + 20 runs
# (200 for the sub-millisecond mtcnn_pnet, gluon_mlp, mxnet_mlp); batch 32 1 + 5.
#
# Per model and batch N:
#   1. Inputs (models.py inputs): one .npy per graph input (images uniform in [-1, 1), token ids,
#      labels, LSTM states; seeded); every tool reads the same files.
#   2. weft replay GRAPH --input NAME=FILE.npy ... --batch N --seed 1 --save-params P
#      --save-outputs DW --warmup W --iters K: weft draws the weights from the seed and writes them
#      to P; its line `replay median_ms=<ms> p90_ms=<ms>` gives the time.
#   3. mxnet_replay.py (in the MXNet venv) GRAPH --params P --input ...: MXNet binds the graph with
#      P's weights, in its fastest form of executor/CachedOp with the MKL-DNN subgraph fusion
#      (`Symbol.optimize_for("MKLDNN")`) and OpenMP threads 1 or all (plain forms only when the
#      fusion fails); `mxnet_ms=<ms>`. Timed like weft: warm-up, then the median of K forward passes,
#      each followed by mx.nd.waitall().
#   4. torch_replay.py GRAPH --params P --input ...: PyTorch runs the graph converted by
#      mxnet_to_torch.py, in its fastest compiled form; `torch_ms=<ms>`. torch=n/a where the
#      converter cannot express the graph (torch_replay.py exits 2 naming what).
#   5. The heads are compared, weft against each peer (max abs and max relative difference to
#      the head's largest magnitude, all heads), and so are the logits: weft, MXNet and PyTorch run
#      once more on a copy of the graph whose heads also list the softmax inputs (random weights
#      saturate several classifiers' softmax into one-hot vectors, which compare equal whatever
#      came before).
#   6. `# replay_<model>_b<N>: ...` (iterations, MXNet's form and threads, PyTorch's mode, the
#      comparisons), then
#      `compare replay_<model>_b<N> weft=<ms> mxnet=<ms|n/a> torch=<ms|n/a> ratio=<weft/best peer>`.
#
# --contended: every case runs twice, weft and MXNet only: quiet, then beside one competing busy
# process (`yes > /dev/null`, started before the runs and killed after them; also on exit or
# interrupt). MXNet's contended run reuses the form and thread count its quiet run chose. Prints
# `compare replay_<model>_b<N>_contended weft=<ms> weft_quiet=<ms> slowdown=<x> mxnet=<ms>
# mxnet_quiet=<ms> mxnet_slowdown=<x> weft_p90=<ms> weft_quiet_p90=<ms>`.
#
# stdout carries "# ..." detail lines and the compare lines; the tools' own output goes to logs in
# the work directory (shown on failure; kept with --keep DIR). Exit status 1 when a run failed or
# outputs disagreed (relative difference above 1e-3 of the head's largest magnitude, or
# non-finite values).
#
# Environment: WEFT_BIN (default <repo>/build/tools/weft), WEFT_MODELS_DIR (default
# <repo>/../shared/models), WEFT_PYTHON (an interpreter that imports torch and numpy; default: the
# first of python3 and /usr/bin/python3 that does), WEFT_MXNET_PYTHON (an interpreter with mxnet
# 1.9.1; default $WEFT_MXNET_VENV/bin/python, WEFT_MXNET_VENV defaulting to <repo>/build/mxnet-venv,
# which tests/mxnet/setup_venv.sh creates when missing; mxnet=n/a when PyPI cannot be reached),
# WEFT_TORCH_THREADS / WEFT_TORCH_MODE (torch_replay.py), WEFT_MXNET_THREADS / WEFT_MXNET_FORM
# (mxnet_replay.py).
#
# Times are only meaningful on an otherwise idle machine (except for --contended's own busy
# process): all three use every core, and OpenMP regions slow down many-fold when other processes
# compete for the cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
weft="${WEFT_BIN:-${repo}/build/tools/weft}"
models_dir="${WEFT_MODELS_DIR:-${repo}/../shared/models}"

quick=0
contended=0
models=""
batches=""
warmup=""
iters=""
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --contended) contended=1 ;;
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

status=0
# MXNet: the venv of tests/mxnet (created here when missing).
mxnet_py="${WEFT_MXNET_PYTHON:-}"
if [[ -z "${mxnet_py}" ]]; then
  venv="${WEFT_MXNET_VENV:-${repo}/build/mxnet-venv}"
  set +e
  "${repo}/tests/mxnet/setup_venv.sh" "${venv}" >&2
  rc=$?
  set -e
  if [[ ${rc} -eq 0 ]]; then
    mxnet_py="${venv}/bin/python"
  elif [[ ${rc} -eq 77 ]]; then
    echo "bench replay: MXNet skipped (the package index cannot be reached): mxnet=n/a" >&2
  else
    echo "bench replay: setting up the MXNet venv ${venv} failed (exit ${rc}): mxnet=n/a" >&2
    status=1
  fi
fi
mxnet_version="n/a"
if [[ -n "${mxnet_py}" ]]; then
  if ! mxnet_version="$("${mxnet_py}" -c "import mxnet; print(mxnet.__version__)" 2>/dev/null)"; then
    echo "bench replay: ${mxnet_py} cannot import mxnet: mxnet=n/a" >&2
    mxnet_py=""; mxnet_version="n/a"; status=1
  fi
fi

all_models="$("${python}" "${here}/models.py" names | paste -sd, -)"
big_models=" $("${python}" "${here}/models.py" big | paste -sd' ' -) "
if [[ -z "${models}" ]]; then
  if [[ ${quick} -eq 1 ]]; then models="mobilenetv2,squeezenet"; else models="${all_models}"; fi
fi
if [[ ${quick} -eq 1 ]]; then
  w1="${warmup:-1}"; i1="${iters:-3}"; w32="${warmup:-1}"; i32="${iters:-2}"; tiny_factor=1
  [[ -n "${batches}" ]] || batches="1"
else
  w1="${warmup:-3}"; i1="${iters:-20}"; w32="${warmup:-1}"; i32="${iters:-5}"; tiny_factor=10
fi
[[ -z "${iters}" ]] || tiny_factor=1
tiny_models=" mtcnn_pnet gluon_mlp mxnet_mlp "

busy_pid=""
stop_busy() {
  if [[ -n "${busy_pid}" ]]; then
    kill "${busy_pid}" 2>/dev/null || true
    wait "${busy_pid}" 2>/dev/null || true
    busy_pid=""
  fi
}
start_busy() {
  stop_busy
  yes >/dev/null &
  busy_pid=$!
  sleep 0.5  # let the scheduler see it
}
if [[ -n "${keep}" ]]; then
  work="${keep}"
  mkdir -p "${work}"
  trap 'stop_busy' EXIT
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/weft-replay-bench.XXXXXX")"
  trap 'stop_busy; rm -rf "${work}"' EXIT
fi
trap 'exit 130' INT
trap 'exit 143' TERM

torch_version="$("${python}" -c "import torch; print(torch.__version__)")"
mode_words=""
[[ ${contended} -eq 0 ]] || mode_words="; --contended: each case quiet, then beside one busy process (yes)"
echo "# replay: weft ${weft} vs MXNet ${mxnet_version} (${mxnet_py:-absent}) and PyTorch ${torch_version}" \
     "(${python}), $(nproc 2>/dev/null || echo '?') CPU cores; models from ${models_dir}${mode_words}"

show_log() {
  echo "bench replay: $1 failed; last lines of $2:" >&2
  tail -n 20 "$2" >&2 || true
}
# value_of KEY FILE: the number after "KEY=" on the last line of FILE that has one; word_of: the
# word (up to a space, comma or semicolon).
value_of() {
  sed -n "s/.*\\b$1=\\([0-9.eE+-][0-9.eE+-]*\\).*/\\1/p" "$2" | tail -n 1
}
word_of() {
  sed -n "s/.*\\b$1=\\([^ ,;]*\\).*/\\1/p" "$2" | tail -n 1
}
ratio_of() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 <= 0) print "n/a"; else printf "%.3f", a / b }'
}
heads_of() {
  "${python}" -c "import json, sys; print(len(json.load(open(sys.argv[1]))['heads']))" "$1"
}

# run_weft DIR TAG SUFFIX: times weft on the case; sets weft_ms, weft_p90 (empty on failure).
run_weft() {
  local log="$1/weft$3.log"
  weft_ms=""; weft_p90=""
  if ! "${weft}" replay "${graph}" "${weft_inputs[@]}" --batch "${n}" --seed 1 --save-params "${params}" \
       --save-outputs "$1/weft$3" --warmup "${w}" --iters "${k}" --quiet >"${log}" 2>&1; then
    show_log "weft replay ($2$3)" "${log}"; return 1
  fi
  weft_ms="$(value_of 'replay median_ms' "${log}")"
  weft_p90="$(value_of p90_ms "${log}")"
  if [[ -z "${weft_ms}" ]]; then
    show_log "weft replay ($2$3): no 'replay median_ms=' in the log" "${log}"; return 1
  fi
}
# run_mxnet DIR TAG SUFFIX [extra flags]: sets mxnet_ms, mxnet_p90, mxnet_form, mxnet_threads.
run_mxnet() {
  local dir="$1" tag="$2" suffix="$3" log="$1/mxnet$3.log"
  shift 3
  mxnet_ms=""; mxnet_p90=""
  if ! "${mxnet_py}" "${here}/mxnet_replay.py" "${graph}" --params "${params}" "${peer_inputs[@]}" \
       --warmup "${w}" --iters "${k}" --save-outputs "${dir}/mxnet${suffix}" "$@" >"${log}" 2>&1; then
    show_log "mxnet_replay (${tag}${suffix})" "${log}"; return 1
  fi
  mxnet_ms="$(value_of mxnet_ms "${log}")"
  mxnet_p90="$(value_of p90_ms "${log}")"
  mxnet_form="$(word_of form "${log}")"
  mxnet_threads="$(word_of threads "${log}")"
  mxnet_fallback=""
  if grep -q "fell back to the plain forms" "${log}"; then
    mxnet_fallback=" (MKL-DNN fusion failed: plain form)"
  fi
  mxnet_nodes="$(sed -n 's/.*(nodes \([0-9]*\) -> \([0-9]*\)).*/\1->\2/p' "${log}" | tail -n 1)"
  if [[ -z "${mxnet_ms}" ]]; then
    show_log "mxnet_replay (${tag}${suffix}): no 'mxnet_ms=' in the log" "${log}"; return 1
  fi
}

IFS=',' read -r -a model_list <<<"${models}"
for m in "${model_list[@]}"; do
  if ! file="$("${python}" "${here}/models.py" file "${m}" 2>/dev/null)"; then
    echo "bench replay: unknown model '${m}' (known: ${all_models})" >&2
    exit 2
  fi
  graph="${models_dir}/${file}"
  if [[ ! -f "${graph}" ]]; then
    echo "bench replay: ${graph} not found (set WEFT_MODELS_DIR)" >&2
    exit 1
  fi
  logits_graph="${work}/${m}-logits.json"
  "${python}" "${here}/mxnet_to_torch.py" logits-graph "${graph}" "${logits_graph}"
  num_heads="$(heads_of "${graph}")"
  if [[ "$(heads_of "${logits_graph}")" -eq "${num_heads}" ]]; then logits_graph=""; fi
  model_batches="${batches}"
  if [[ -z "${model_batches}" ]]; then
    model_batches="1"
    [[ "${big_models}" != *" ${m} "* ]] || model_batches="1 32"
  fi
  for n in ${model_batches}; do
    if [[ "${n}" -eq 1 ]]; then w="${w1}"; k="${i1}"; else w="${w32}"; k="${i32}"; fi
    [[ "${tiny_models}" != *" ${m} "* ]] || k=$((k * tiny_factor))
    tag="replay_${m}_b${n}"
    dir="${work}/${tag}"
    mkdir -p "${dir}"
    params="${dir}/weights.params"
    weft_inputs=(); peer_inputs=()
    while IFS= read -r spec; do
      weft_inputs+=(--input "${spec}"); peer_inputs+=(--input "${spec}")
    done < <("${python}" "${here}/models.py" inputs "${m}" "${n}" "${dir}/inputs")

    run_weft "${dir}" "${tag}" "" || { status=1; continue; }
    q_weft_ms="${weft_ms}"; q_weft_p90="${weft_p90}"
    mxnet_ms=""; mxnet_p90=""; mxnet_form=""; mxnet_threads=""; mxnet_nodes=""; mxnet_fallback=""
    logits_flags=()
    [[ -z "${logits_graph}" ]] || logits_flags=(--logits-graph "${logits_graph}" --save-logits "${dir}/mxnet_logits")
    if [[ -n "${mxnet_py}" ]]; then
      run_mxnet "${dir}" "${tag}" "" "${logits_flags[@]}" || status=1
    fi
    q_mxnet_ms="${mxnet_ms}"
    torch_ms=""; torch_mode=""; torch_note=""
    if [[ ${contended} -eq 0 ]]; then
      if "${python}" "${here}/torch_replay.py" "${graph}" --params "${params}" "${peer_inputs[@]}" \
           --batch "${n}" --warmup "${w}" --iters "${k}" --save-outputs "${dir}/torch" >"${dir}/torch.log" 2>&1; then
        torch_ms="$(value_of torch_ms "${dir}/torch.log")"
        torch_mode="$(sed -n 's/.*mode=\([^,]*\),.*/\1/p' "${dir}/torch.log" | tail -n 1)"
        [[ -n "${torch_ms}" ]] || { show_log "torch_replay (${tag}): no 'torch_ms='" "${dir}/torch.log"; status=1; }
      elif grep -q '^torch_replay: error:' "${dir}/torch.log"; then
        torch_note="torch n/a: $(sed -n 's/^torch_replay: error: //p' "${dir}/torch.log" | head -n 1)"
      else
        show_log "torch_replay (${tag})" "${dir}/torch.log"; status=1
      fi
    fi

    # Outputs: all heads from the timed runs, then the logits from one run of each on the copy.
    check=""
    if [[ -n "${logits_graph}" ]] &&
       ! "${weft}" replay "${logits_graph}" --params "${params}" "${weft_inputs[@]}" --batch "${n}" \
           --save-outputs "${dir}/weft_logits" --warmup 0 --iters 1 --quiet >"${dir}/weft_logits.log" 2>&1; then
      show_log "weft's logits run (${tag})" "${dir}/weft_logits.log"; status=1
    fi
    for peer in mxnet torch; do
      [[ -d "${dir}/${peer}" ]] || continue
      check+="; ${peer}: "
      if ! check+="$("${python}" "${here}/compare_outputs.py" "${dir}/weft" "${dir}/${peer}")"; then status=1; fi
      if [[ -n "${logits_graph}" && "${peer}" == torch && -f "${dir}/weft_logits/0.npy" ]]; then
        if ! "${python}" "${here}/torch_replay.py" "${logits_graph}" --params "${params}" "${peer_inputs[@]}" \
             --batch "${n}" --mode eager --warmup 0 --iters 1 --save-outputs "${dir}/torch_logits" \
             >"${dir}/torch_logits.log" 2>&1; then
          show_log "torch's logits run (${tag})" "${dir}/torch_logits.log"; status=1
        fi
      fi
      if [[ -n "${logits_graph}" && -d "${dir}/${peer}_logits" && -d "${dir}/weft_logits" ]]; then
        check+=", logits "
        if ! check+="$("${python}" "${here}/compare_outputs.py" "${dir}/weft_logits" "${dir}/${peer}_logits" \
                       --heads "from:${num_heads}")"; then status=1; fi
      fi
    done
    mxnet_words="mxnet n/a"
    [[ -z "${mxnet_ms}" ]] ||
      mxnet_words="mxnet form=${mxnet_form}${mxnet_fallback} (nodes ${mxnet_nodes}) threads=${mxnet_threads} p90=${mxnet_p90}"
    torch_words="${torch_note:-torch n/a}"
    [[ -z "${torch_mode}" ]] || torch_words="torch mode=${torch_mode}"
    [[ ${contended} -eq 0 ]] || torch_words="torch not run (--contended)"

    if [[ ${contended} -eq 0 ]]; then
      best="$(printf '%s\n' "${mxnet_ms}" "${torch_ms}" | grep . | sort -g | head -n 1)" || true
      echo "# ${tag}: iters=${k} warmup=${w}; weft p90=${weft_p90}; ${mxnet_words}; ${torch_words}${check}"
      echo "compare ${tag} weft=${weft_ms} mxnet=${mxnet_ms:-n/a} torch=${torch_ms:-n/a} ratio=$(ratio_of "${weft_ms}" "${best}")"
    else
      start_busy
      c_ok=1
      run_weft "${dir}" "${tag}" "_contended" || { c_ok=0; status=1; }
      if [[ -n "${q_mxnet_ms}" ]]; then
        run_mxnet "${dir}" "${tag}" "_contended" --form "${mxnet_form}" --threads "${mxnet_threads}" || status=1
      fi
      stop_busy
      [[ ${c_ok} -eq 1 ]] || continue
      q_mxnet_ms="${q_mxnet_ms:-}"
      echo "# ${tag}_contended: iters=${k} warmup=${w}; ${mxnet_words}${check}"
      echo "compare ${tag}_contended weft=${weft_ms} weft_quiet=${q_weft_ms}" \
           "slowdown=$(ratio_of "${weft_ms}" "${q_weft_ms}") mxnet=${mxnet_ms:-n/a} mxnet_quiet=${q_mxnet_ms:-n/a}" \
           "mxnet_slowdown=$(ratio_of "${mxnet_ms}" "${q_mxnet_ms}") weft_p90=${weft_p90} weft_quiet_p90=${q_weft_p90}"
    fi
    [[ -n "${keep}" ]] || rm -f "${params}"
  done
done
exit "${status}"
