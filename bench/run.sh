#!/usr/bin/env bash
# The one entry point for weft's benchmarks: configures (when needed) and builds a Release tree in
# <repo>/build-bench, builds the suite's target and runs it, printing its compare lines.
#
#   bench/run.sh SUITE [--quick] [other flags for the suite's benchmark]
#
# Suites: engine (weft_engine_bench: the engine against oneTBB's flow graph), memory
# (weft_memory_bench through bench/memory/run_memory.sh: the allocators against malloc and
# oneTBB's scalable_malloc), ops (weft_ops_bench: operators against libtorch), planner
# (weft_planner_bench: memory plans of every model in ../shared/models against MXNet-style block
# sharing), replay (bench/replay/run.sh: `weft replay` against MXNet 1.9.1 and PyTorch running the
# same graph with the same weights, every MXNet model of ../shared/models; --contended runs each
# beside a busy process), ffi (weft_ffi_bench: foreign C operations pushed through the C ABI against
# native C++ pushes on the same engine, and DLPack round trips; then weft_ffi_so_bench, the same
# C calls through libweft_c.so), python (bench/python/py_bench.py: weft's Python package against
# PyTorch in the same process and MXNet 1.9.1 in a subprocess; see below), train
# (bench/python/train_bench.py: a hybridized weft.nn ResNet-18 training step against PyTorch's),
# serve (bench/serve/run.sh: `weft serve` under wrk against a PyTorch server on the same graph),
# data (weft_data_bench through bench/data/run.sh: input pipelines of weft::data against PyTorch's
# DataLoader, and tf.data where installed, on the same generated images), dist (weft_dist_bench
# through bench/dist/run.sh: allreduce through the engine against plain MPI_Allreduce and
# torch.distributed with Gloo, under mpirun), gpu (weft_gpu_bench through bench/gpu/run.sh: tiny-op
# overhead, a dependent chain, convolution and matrix product on cuda:0 against PyTorch),
# gpu-replay (bench/gpu/replay.sh: `weft replay --device cuda:0` of ResNet-50, MobileNetV2 and
# Inception-v3 at batch 1/32/256 against PyTorch's eager, channels_last and CUDA-graph forms).
# A new suite adds one arm to each of the two case statements below; python and train build
# nothing and run from the first.
#
# The python and train suites run the package scripts/test.sh installs into the venv
# <build>/pyenv (build: WEFT_BUILD_DIR, default <repo>/build); run scripts/test.sh first.
# Overrides:
#   WEFT_PYTHON        the interpreter to use instead (it must import weft, torch and numpy); with
#                      WEFT_NATIVE_DIR=<extension build folder> and PYTHONPATH=<repo>/python it
#                      runs an uninstalled development build of the package
#   WEFT_MXNET_PYTHON  the interpreter with mxnet 1.9.1 (default <build>/mxnet-venv/bin/python, made
#                      by tests/mxnet/setup_venv.sh, or $WEFT_MXNET_VENV/bin/python); the MXNet
#                      comparison is skipped with a message when it is absent
# It installs the peer's Debian packages when missing (python3-torch; libopenblas0-pthread, without
# which PyTorch's matrix products run on the reference BLAS).
#
# WEFT_BENCH_BUILD_DIR overrides the build tree (default <repo>/build-bench, configured without
# CUDA; <repo>/build-bench-gpu for the gpu suite). WEFT_BENCH_USE_TREE=1 takes that tree as it is
# configured (build type, CUDA) and only turns the benchmarks on in it: CI points it at the tree
# the tests built, so that nothing is compiled twice (its figures are then of that build type, and
# the report says so). A tree that lacks the
# suite's target (configured before the peer was installed) is configured again.
# Build output goes to stderr; stdout carries only the benchmark's report ("# ..." header and
# detail lines, and the "compare ..." lines). WEFT_BENCH_JOBS overrides the build parallelism
# (default: nproc, at most 2).
set -euo pipefail

suites="engine memory ops planner replay ffi python train serve data dist gpu gpu-replay"

usage() {
  echo "usage: $0 SUITE [--quick] [flags passed to the suite's benchmark]" >&2
  echo "suites: ${suites}" >&2
}

if [[ $# -lt 1 ]]; then
  usage
  exit 2
fi
suite="$1"
shift

case "${suite}" in
  engine)
    target=weft_engine_bench
    ;;
  memory)
    target=weft_memory_bench
    ;;
  ops)
    target=weft_ops_bench
    if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
      echo "bench ops: installing the peer (libtorch-dev, libopenblas0-pthread)" >&2
      sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
      $sudo apt-get install -y -qq libtorch-dev libopenblas0-pthread >&2
    fi
    ;;
  planner)
    target=weft_planner_bench
    ;;
  replay)
    target=weft_cli
    # MXNet, the other peer, lives in a venv that bench/replay/run.sh creates when missing
    # (tests/mxnet/setup_venv.sh). Debian's python3-torch lives in /usr/bin/python3's dist-packages (a python3 earlier on PATH,
    # e.g. pyenv's, does not see it).
    if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
      echo "bench replay: installing the peer (python3-torch)" >&2
      sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
      $sudo apt-get install -y -qq python3-torch >&2
    fi
    ;;
  ffi)
    target="weft_ffi_bench weft_ffi_so_bench"
    ;;
  serve)
    target=weft_cli  # bench/serve/run.sh installs its peers (wrk, python3-torch)
    ;;
  data)
    target=weft_data_bench  # bench/data/run.sh installs its peers (python3-torch, python3-pil)
    ;;
  dist)
    target=weft_dist_bench  # needs MPI (libopenmpi-dev); the Gloo peer is Debian's python3-torch
    ;;
  gpu)
    target=weft_gpu_bench  # needs the CUDA build and a GPU; the peer is the machine's torch
    ;;
  gpu-replay)
    target=weft_cli  # `weft replay --device cuda:0`; the peer is the machine's torch
    ;;
  python|train)
    # Nothing to build (scripts/test.sh builds and installs the package): runs from this arm.
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    python_build="${WEFT_BUILD_DIR:-${repo}/build}"
    py="${WEFT_PYTHON:-${python_build}/pyenv/bin/python}"
    if [[ ! -x "${py}" ]]; then
      echo "bench python: no interpreter at ${py}: run scripts/test.sh (it installs the weft" \
           "package into ${python_build}/pyenv) or set WEFT_PYTHON" >&2
      exit 1
    fi
    peer_packages=()
    if ! "${py}" -c "import torch" 2>/dev/null; then peer_packages+=(python3-torch); fi
    if ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null |
         grep -q "install ok installed"; then
      peer_packages+=(libopenblas0-pthread)
    fi
    if [[ ${#peer_packages[@]} -gt 0 ]]; then
      echo "bench python: installing the peer (${peer_packages[*]})" >&2
      sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
      # Best effort: without OpenBLAS PyTorch still runs, on the reference BLAS, and the report
      # names the BLAS it loaded.
      $sudo apt-get install -y -qq "${peer_packages[@]}" >&2 ||
        echo "bench python: could not install ${peer_packages[*]}" >&2
    fi
    # From outside the repository, so that `import weft` is the installed package (or the one
    # PYTHONPATH names), never the source folder by accident.
    if ! (cd / && "${py}" -c "import weft, torch, numpy") >/dev/null 2>&1; then
      echo "bench python: ${py} cannot import weft, torch and numpy:" >&2
      (cd / && "${py}" -c "import weft, torch, numpy") >&2 || true
      echo "run scripts/test.sh (it installs the weft package into ${python_build}/pyenv) or set" \
           "WEFT_PYTHON (and WEFT_NATIVE_DIR + PYTHONPATH for a development build)" >&2
      exit 1
    fi
    mxnet_py="${WEFT_MXNET_PYTHON:-${WEFT_MXNET_VENV:-${python_build}/mxnet-venv}/bin/python}"
    cd /
    if [[ "${suite}" == train ]]; then
      exec "${py}" "${repo}/bench/python/train_bench.py" "$@"
    fi
    exec "${py}" "${repo}/bench/python/py_bench.py" --mxnet-python "${mxnet_py}" "$@"
    ;;
  -h|--help)
    usage
    exit 0
    ;;
  *)
    echo "unknown suite '${suite}'" >&2
    usage
    exit 2
    ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
default_build="${repo}/build-bench"
[[ "${suite}" == gpu || "${suite}" == gpu-replay ]] &&
  default_build="${repo}/build-bench-gpu"  # the CUDA build (configure)
build="${WEFT_BENCH_BUILD_DIR:-${default_build}}"

# oneTBB is the peer every engine comparison runs against; bench/CMakeLists.txt requires it.
tbb_missing_message() {
  echo "error: oneTBB (the benchmarks' peer) was not found: apt-get install libtbb-dev" >&2
  echo "       (or point CMake at it: WEFT_BENCH_CMAKE_ARGS=-DTBB_DIR=<prefix>/lib/cmake/TBB)" >&2
}

cache="${build}/CMakeCache.txt"
use_tree="${WEFT_BENCH_USE_TREE:-0}"
if [[ "${use_tree}" == 1 && ! -f "${cache}" ]]; then
  echo "error: WEFT_BENCH_USE_TREE=1 but ${build} is not a configured tree" >&2
  exit 1
fi
configure() {
  generator=()
  if [[ ! -f "${cache}" ]]; then
    if command -v ninja >/dev/null 2>&1; then
      generator=(-G Ninja)
    else
      generator=(-G "Unix Makefiles")
    fi
  fi
  mkdir -p "${build}"
  configure_log="${build}/configure.log"
  # shellcheck disable=SC2086  # WEFT_BENCH_CMAKE_ARGS is a list of words on purpose
  # The CPU suites do not need the CUDA kernels (compiling them is most of a clean tree's build
  # on two cores): only the gpu suite, in its own tree, builds with CUDA.
  local cuda=OFF
  [[ "${suite}" == gpu || "${suite}" == gpu-replay ]] && cuda=AUTO
  local settings=(-DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF -DWEFT_USE_CUDA="${cuda}")
  [[ "${use_tree}" == 1 ]] && settings=()
  if ! cmake -S "${repo}" -B "${build}" "${generator[@]}" "${settings[@]}" -DWEFT_BUILD_BENCH=ON \
         ${WEFT_BENCH_CMAKE_ARGS:-} \
         >"${configure_log}" 2>&1; then
    cat "${configure_log}" >&2
    if grep -q 'needs oneTBB' "${configure_log}"; then
      tbb_missing_message
    fi
    exit 1
  fi
  cat "${configure_log}" >&2
}

# The suite's targets the tree does not define (CMake's `help` target lists them, with any
# generator: "NAME: phony" for Ninja, "... NAME" for Makefiles).
missing_targets() {
  local known
  known="$(cmake --build "${build}" --target help 2>/dev/null)" || true
  for t in ${target}; do
    grep -qE "^(\.\.\. )?${t}(:| |\$)" <<<"${known}" || printf '%s ' "${t}"
  done
}

# Configure when there is no tree yet, or the tree is not a Release build with the benchmarks on
# (any build type with WEFT_BENCH_USE_TREE=1).
if [[ ! -f "${cache}" ]] || ! grep -q '^WEFT_BUILD_BENCH:BOOL=ON$' "${cache}" ||
   { [[ "${use_tree}" != 1 ]] && ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "${cache}"; }; then
  configure
fi
if [[ "${use_tree}" == 1 ]]; then
  echo "bench ${suite}: built in ${build} as $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "${cache}")" \
       "(WEFT_BENCH_USE_TREE=1; recorded figures come from a Release tree)" >&2
fi
# A target the tree does not know: it was configured before the suite's peer was installed
# (bench/ops defines weft_ops_bench only when CMake finds libtorch, and a tree configured without
# it is not configured again by the build). Configuring again searches for the peer again (a
# package CMake did not find is cached as NOTFOUND, which every configure retries).
missing="$(missing_targets)"
if [[ -n "${missing}" ]]; then
  echo "bench ${suite}: the tree ${build} has no target ${missing% }; configuring again" >&2
  configure
  missing="$(missing_targets)"
  if [[ -n "${missing}" ]]; then
    echo "error: ${build} still has no target ${missing% } after configuring again" \
         "(see ${build}/configure.log)" >&2
    if [[ "${suite}" == ops ]]; then
      echo "       CMake does not find libtorch: apt-get install libtorch-dev, or" \
           "WEFT_BENCH_CMAKE_ARGS=-DTorch_DIR=<the folder of TorchConfig.cmake>" >&2
    fi
    exit 1
  fi
fi

nproc_count="$(nproc 2>/dev/null || echo 2)"
jobs="${WEFT_BENCH_JOBS:-$(( nproc_count < 2 ? nproc_count : 2 ))}"
# shellcheck disable=SC2086  # a suite may name several targets
cmake --build "${build}" --target ${target} -j "${jobs}" >&2

case "${suite}" in
  engine)
    exec "${build}/bench/weft_engine_bench" "$@"
    ;;
  memory)
    exec "${repo}/bench/memory/run_memory.sh" "${build}" "$@"
    ;;
  ops)
    exec "${build}/bench/ops/weft_ops_bench" "$@"
    ;;
  planner)
    exec "${build}/bench/planner/weft_planner_bench" "$@"
    ;;
  replay)
    WEFT_BIN="${build}/tools/weft" exec "${repo}/bench/replay/run.sh" "$@"
    ;;
  ffi)
    "${build}/bench/ffi/weft_ffi_bench" "$@"
    exec "${build}/bench/ffi/weft_ffi_so_bench" "$@"
    ;;
  serve)
    WEFT_BIN="${build}/tools/weft" exec "${repo}/bench/serve/run.sh" "$@"
    ;;
  dist)
    WEFT_DIST_BENCH_BIN="${build}/bench/dist/weft_dist_bench" exec "${repo}/bench/dist/run.sh" "$@"
    ;;
  data)
    WEFT_DATA_BENCH_BIN="${build}/bench/data/weft_data_bench" exec "${repo}/bench/data/run.sh" "$@"
    ;;
  gpu)
    WEFT_GPU_BENCH_BIN="${build}/bench/gpu/weft_gpu_bench" exec "${repo}/bench/gpu/run.sh" "$@"
    ;;
  gpu-replay)
    WEFT_BIN="${build}/tools/weft" exec "${repo}/bench/gpu/replay.sh" "$@"
    ;;
esac
