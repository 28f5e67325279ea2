#!/usr/bin/env bash
# Here, on the build machine: packs the binaries the GPU suites and bench/gpu need, stripped, from
# a Release build with CUDA (default build/), into .gpu/bundle.tar.xz, so that a lent GPU machine
# runs them without building (scripts/gpu_session.sh unpacks it there; the paths inside are the
# build tree's). The binaries link cuDNN, cuBLAS and the CUDA runtime dynamically (the GPU
# machine's own) and oneDNN from the Debian packages in .gpu/debs.
#   bash scripts/gpu_bundle.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${1:-$root/build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for bin in tests/weft_gpu_engine_tests tests/weft_gpu_tests tests/weft_ops_tests \
           tests/weft_devices_tests tests/memory/weft_memory_tests tools/weft \
           bench/gpu/weft_gpu_bench; do
  [ -x "$build/$bin" ] || { echo "gpu_bundle: $build/$bin is missing (build it first)" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$bin")"
  strip -o "$stage/$bin" "$build/$bin"
done
# The shared model graphs (../shared does not travel): the executor's GPU tests replay them.
if [ -d "$root/../shared/models" ]; then
  mkdir -p "$stage/models" && cp "$root"/../shared/models/*.json "$stage/models/"
fi
git -C "$root" rev-parse HEAD > "$stage/COMMIT"
git -C "$root" status --short >> "$stage/COMMIT"
mkdir -p "$root/.gpu"
tar -C "$stage" -cJf "$root/.gpu/bundle.tar.xz" .
ls -la "$root/.gpu/bundle.tar.xz"
