#!/usr/bin/env bash
# Allreduce bus bandwidth by message size, 4 B to 64 MiB, 2 processes on this machine:
# weft's engine path against plain MPI_Allreduce of the same Open MPI (weft_dist_bench, both in one
# run) and against torch.distributed with Gloo (torch_gloo.py, Debian's PyTorch 1.13). Prints the
# tables, then per size
#   compare dist_allreduce_<bytes> weft=<us> mpi=<us> torch_gloo=<us> ratio=<weft/mpi>
# (goal: ratio <= 1.10 from 1 MiB up). Then GPU arrays: weft's engine path over NCCL against a
# direct ncclAllReduce on the same GPU (weft_dist_bench --nccl), per size
#   compare dist_nccl_allreduce_<bytes> weft=<us> nccl=<us> ratio=<weft/nccl>
# or "# nccl: skipped (...)" without NCCL in the build or a GPU per process. The default bench
# tree is configured without CUDA: point WEFT_DIST_BENCH_BIN at a CUDA build's binary for it.
#
#   bench/dist/run.sh [--quick]       (bench/run.sh dist builds the binary and calls this)
# Environment: WEFT_DIST_BENCH_BIN (default <repo>/build-bench/bench/dist/weft_dist_bench),
# WEFT_DIST_NP (processes, default 2), WEFT_PYTHON (interpreter with torch; default /usr/bin/python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
bin="${WEFT_DIST_BENCH_BIN:-${repo}/build-bench/bench/dist/weft_dist_bench}"
np="${WEFT_DIST_NP:-2}"
python="${WEFT_PYTHON:-/usr/bin/python3}"
mpirun=(mpirun --allow-run-as-root --oversubscribe -np "${np}")
quick=()
for a in "$@"; do [[ "$a" == --quick ]] && quick=(--quick); done

weft_out="$(WEFT_NUM_THREADS=1 "${mpirun[@]}" "${bin}" "${quick[@]}")"
echo "${weft_out}"
gloo_out=""
if "${python}" -c "import torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; then
  port=$(( 29500 + RANDOM % 1000 ))
  gloo_out="$(WEFT_GLOO_PORT=${port} MASTER_PORT=${port} "${mpirun[@]}" -x WEFT_GLOO_PORT -x MASTER_PORT \
              "${python}" "${here}/torch_gloo.py" "${quick[@]}" 2>&1 | grep '^torch_gloo' || true)"
  echo "${gloo_out}"
else
  echo "# torch.distributed with Gloo is not available to ${python}: no PyTorch column" >&2
fi
# One compare line per size: weft and MPI from the same run, Gloo from its own.
awk -v gloo="${gloo_out}" '
  BEGIN { n = split(gloo, lines, "\n"); for (i = 1; i <= n; i++) {
            split(lines[i], f, " "); b = ""; u = "";
            for (j in f) { if (f[j] ~ /^bytes=/) b = substr(f[j], 7); if (f[j] ~ /^us=/) u = substr(f[j], 4) }
            if (b != "") g[b] = u } }
  /^dist_allreduce/ { b = ""; m = ""; w = "";
    for (j = 1; j <= NF; j++) { split($j, kv, "="); if (kv[1] == "bytes") b = kv[2];
      if (kv[1] == "mpi_us") m = kv[2]; if (kv[1] == "weft_us") w = kv[2] }
    t = (b in g) ? g[b] : "n/a";
    printf "compare dist_allreduce_%s weft=%s mpi=%s torch_gloo=%s ratio=%.3f\n", b, w, m, t, w / m }
' <<<"${weft_out}"
# GPU arrays over NCCL (skipped, with a "# nccl: skipped" line, without NCCL or a GPU per process).
nccl_out="$(WEFT_NUM_THREADS=1 "${mpirun[@]}" "${bin}" --nccl "${quick[@]}")"
echo "${nccl_out}"
awk '/^dist_nccl_allreduce/ { b = ""; m = ""; w = "";
    for (j = 1; j <= NF; j++) { split($j, kv, "="); if (kv[1] == "bytes") b = kv[2];
      if (kv[1] == "nccl_us") m = kv[2]; if (kv[1] == "weft_us") w = kv[2] }
    printf "compare dist_nccl_allreduce_%s weft=%s nccl=%s ratio=%.3f\n", b, w, m, w / m }
' <<<"${nccl_out}"
