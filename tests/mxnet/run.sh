#!/usr/bin/env bash
# CI stage: weft against real MXNet 1.9.1. Sets up the MXNet venv (skipped, with the reason
# printed, only when PyPI cannot be reached), then runs the operator check (ops_check.py with
# weft_op_driver), the model check (models_check.py with the weft CLI) and the weft.nn export
# check (nn_export_check.py: models built from layers, exported, loaded and run by MXNet; it uses
# the weft Python package in BUILD_DIR/pyenv, or WEFT_PYTHON).
#
#   tests/mxnet/run.sh BUILD_DIR [OUT_DIR]
#
# BUILD_DIR: a build tree configured with -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_TESTS=ON (its weft CLI
# and weft_op_driver are brought up to date here). OUT_DIR (default BUILD_DIR/mxnet-check) gets
# ops/ and models/ work files and the JSON summaries. WEFT_MXNET_VENV overrides the venv location
# (default build/mxnet-venv). Exit status: 0 pass or skip, non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: tests/mxnet/run.sh BUILD_DIR [OUT_DIR]}" && pwd)"
out="${2:-$build/mxnet-check}"
venv="${WEFT_MXNET_VENV:-$root/build/mxnet-venv}"
jobs="${WEFT_JOBS:-2}"

set +e
"$root/tests/mxnet/setup_venv.sh" "$venv"
rc=$?
set -e
if [ "$rc" -eq 77 ]; then
  echo "mxnet stage: SKIPPED (PyPI cannot be reached; see the reason above)"
  exit 0
elif [ "$rc" -ne 0 ]; then
  echo "mxnet stage: setting up the MXNet venv failed (exit $rc)" >&2
  exit "$rc"
fi
py="$venv/bin/python"

targets=(weft_cli)
have_ops=0
if [ -f "$root/tests/mxnet/ops_check.py" ]; then
  have_ops=1
  targets+=(weft_op_driver)
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
mkdir -p "$out"

status=0
if [ "$have_ops" = 1 ]; then
  echo "== MXNet 1.9.1 vs weft: operators =="
  timeout 600 "$py" "$root/tests/mxnet/ops_check.py" --driver "$build/tests/mxnet/weft_op_driver" \
    --out "$out/ops" || status=1
else
  echo "== MXNet 1.9.1 vs weft: operators: tests/mxnet/ops_check.py not present, skipped =="
fi

echo "== MXNet 1.9.1 vs weft: models at batch 1 =="
timeout 900 "$py" "$root/tests/mxnet/models_check.py" --weft "$build/tools/weft" --out "$out/models" \
  || status=1

# weft.nn's export (model.export) loaded by MXNet: needs weft's Python package, which
# scripts/test.sh (scripts/python_test.sh) installs into BUILD_DIR/pyenv; WEFT_PYTHON overrides.
# Skipped, with the reason printed, when that Python is absent; a Python that cannot import
# weft.nn fails the stage (the package is broken, not missing).
weft_py="${WEFT_PYTHON:-$build/pyenv/bin/python}"
if [ ! -x "$weft_py" ]; then
  echo "== MXNet 1.9.1 vs weft: weft.nn export: SKIPPED (no weft Python at $weft_py; run" \
    "scripts/test.sh or set WEFT_PYTHON) =="
elif ! (cd / && "$weft_py" -c "import weft.nn"); then
  echo "== MXNet 1.9.1 vs weft: weft.nn export: FAILED ($weft_py cannot import weft.nn) =="
  status=1
else
  echo "== MXNet 1.9.1 vs weft: weft.nn export =="
  timeout 600 "$py" "$root/tests/mxnet/nn_export_check.py" --weft-python "$weft_py" \
    --mxnet-python "$py" --out "$out/nn-export" || status=1
fi

# RecordIO files and image decoding exchanged with MXNet (recordio_check.py runs weft_data_tests).
echo "== MXNet 1.9.1 vs weft: RecordIO =="
if cmake --build "$build" -j "$jobs" --target weft_data_tests; then
  timeout 600 "$py" "$root/tests/mxnet/recordio_check.py" --tests "$build/tests/weft_data_tests" \
    --out "$out/recordio" || status=1
else
  status=1
fi

exit "$status"
