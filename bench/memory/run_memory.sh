#!/usr/bin/env bash
# Runs weft's memory benchmark suite on an already built tree: generates the allocation traces
# of the MXNet models (bench/memory/alloc_trace.py, into BUILD_DIR/memory_traces), runs the
# allocator hot path (weft's pool against glibc malloc and oneTBB's scalable_malloc) and replays
# the traces through every pool strategy (fragmentation), printing every line.
#
#   bench/memory/run_memory.sh BUILD_DIR [--quick]
#
# BUILD_DIR is a build tree with the weft_memory_bench target built. --quick: five models at
# batch 1 and short hot-path loops (well under a minute). The models are read from
# ../shared/models relative to the repository root (WEFT_MODELS_DIR overrides it).
# stdout: "# ..." header and detail lines, "compare ..." (hot path against the peers),
# "info ...", "frag ..." / "variant ..." / "summary frag ..." (fragmentation).
set -euo pipefail

usage() {
  echo "usage: $0 BUILD_DIR [--quick]" >&2
}

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  usage
  [[ $# -ge 1 ]] && exit 0
  exit 2
fi
build="$(cd "$1" && pwd)"
shift
quick=()
for arg in "$@"; do
  case "${arg}" in
    --quick) quick=(--quick) ;;
    *) echo "unknown argument '${arg}'" >&2; usage; exit 2 ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
models="${WEFT_MODELS_DIR:-${repo}/../shared/models}"

bench="${build}/bench/memory/weft_memory_bench"
if [[ ! -x "${bench}" ]]; then
  bench="$(find "${build}" -name weft_memory_bench -type f -perm -u+x 2>/dev/null | head -n 1)"
fi
if [[ -z "${bench}" || ! -x "${bench}" ]]; then
  echo "error: weft_memory_bench is not built in ${build} (build the weft_memory_bench target)" >&2
  exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 is needed to generate the allocation traces" >&2
  exit 1
fi
if [[ ! -d "${models}" ]]; then
  echo "error: model folder ${models} not found (set WEFT_MODELS_DIR)" >&2
  exit 1
fi

traces="${build}/memory_traces"
rm -rf "${traces}"
mkdir -p "${traces}"
# A model that cannot be traced is reported ("skip ...") and left out; the rest still run.
python3 "${here}/alloc_trace.py" --models-dir "${models}" --out "${traces}" "${quick[@]}" |
  sed 's/^/# /' || true

shopt -s nullglob
files=("${traces}"/*.trace)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "error: no allocation traces were generated" >&2
  exit 1
fi
"${bench}" --hot-path "${quick[@]}" --fragmentation "${files[@]}" --variants
