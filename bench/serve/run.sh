#!/usr/bin/env bash
# Serving benchmark: `weft serve` against a PyTorch server (bench/serve/torch_server.py, Debian's
# PyTorch 1.13) on the same graph, weights and input, driven by wrk on loopback.
#
#   bench/serve/run.sh [--quick] [--models resnet18,mobilenetv2] [--seconds S] [--keep DIR]
#
# Per model (ResNet-18 and MobileNetV2 from ../shared/models; --quick: ResNet-18 only, 3-second
# runs instead of 8):
#   1. `weft replay --seed 1 --save-params` writes the weights; both servers load that file (weft
#      from a model repository with config.json: max_batch 8, max_delay_ms 2, batch sizes
#      1, 2, 4, 8 warmed up at load).
#   2. Three servers, one at a time: weft with batching, weft with --no-batching, the PyTorch
#      server (one inference at a time, its fastest compiled form for batch 1 as
#      bench/replay/torch_replay.py --mode auto picks it, 2 threads). Each answers one request
#      first; weft's answers must equal PyTorch's within 1e-3 of the largest magnitude.
#   3. wrk POSTs a batch-1 .npy body (bench/serve/post_npy.lua) with 1 connection, then 2, 4, 8
#      and 16 (--quick: 4 and 8), one run each, reporting req/s, p50 and p99.
#   4. Saturation: X = 4 x PyTorch's single-connection median latency; each server's figure is
#      its highest req/s over the runs whose p99 <= X:
#        compare serve_<model>_saturation_<batching|nobatching> weft=<req/s> peer=<req/s>
#          ratio=<peer/weft>           (the goal: ratio <= 0.67, i.e. weft >= 1.5x the peer)
#   5. Fixed rate: 4 connections paced (wrk's delay()) to offer about half of PyTorch's capacity;
#        compare serve_<model>_rate_<batching|nobatching>_p99_ms weft=<ms> peer=<ms>
#          ratio=<weft/peer>
# stdout carries "# ..." detail lines and the compare lines. Exit status 1 when outputs disagree
# or a server fails; failed HTTP requests abort the run.
#
# Environment: WEFT_BIN (default <repo>/build/tools/weft), WEFT_MODELS_DIR (default
# <repo>/../shared/models), WEFT_PYTHON (an interpreter with Debian's torch and numpy; default
# /usr/bin/python3). Installs wrk and python3-torch with apt-get when missing. Numbers are only
# meaningful on an otherwise idle machine: both servers use every core.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for arg in "$@"; do
  if [[ "${arg}" == -h || "${arg}" == --help ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 0
  fi
done
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
"${WEFT_PYTHON:-/usr/bin/python3}" -c "import torch, numpy" 2>/dev/null || missing+=(python3-torch)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "bench serve: installing ${missing[*]}" >&2
  sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get install -y -qq "${missing[@]}" >&2
fi
exec "${WEFT_PYTHON:-/usr/bin/python3}" "${here}/serve_bench.py" "$@"
