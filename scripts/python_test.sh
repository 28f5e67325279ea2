#!/usr/bin/env bash
# Builds the Python package against the C++ tree scripts/test.sh built, installs it into a venv
# and runs its pytest suite. Called by scripts/test.sh; idempotent (the extension's build folder
# is kept, so a second run rebuilds only what changed).
#   scripts/python_test.sh [BUILD_DIR]     default: <repo>/build
#
# Two venvs, both on the system's Python 3.11 (/usr/bin/python3):
#   BUILD/pyenv      with the system site-packages: Debian's numpy 1.24 and PyTorch 1.13 (the
#                    CPU peer; PyPI's torch wheels carry CUDA and download.pytorch.org is not
#                    reachable from these machines), pytest; nanobind and scikit-build-core from
#                    PyPI to build the extension. The whole suite runs here.
#   BUILD/pyenv-np2  isolated, with NumPy 2 from PyPI: the DLPack tests again, so the versioned
#                    (1.x) capsules are exercised by a consumer that asks for them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-${WEFT_BUILD_DIR:-$root/build}}" && pwd)"
python=/usr/bin/python3

prefix="$build/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

venv="$build/pyenv"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c "import nanobind, scikit_build_core" 2>/dev/null; then
  "$venv/bin/pip" install -q "nanobind>=2.4" "scikit-build-core>=0.10"
fi

# One wheel, built once against the installed C++ library, installed into both venvs.
wheels="$build/python-wheels"
rm -rf "$wheels"
echo "== python: building the weft wheel (nanobind + scikit-build-core) =="
WEFT_PREFIX="$prefix" CMAKE_BUILD_PARALLEL_LEVEL="${WEFT_JOBS:-$(nproc)}" \
  "$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$wheels" "$root"
wheel=("$wheels"/weft-*.whl)
"$venv/bin/pip" install -q --force-reinstall --no-deps "${wheel[0]}"

echo "== python: pytest (system numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)'), torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo absent)) =="
# From outside the repository, so that `import weft` is the installed package.
(cd "$build" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests")

np2="$build/pyenv-np2"
if [ ! -x "$np2/bin/python" ]; then
  "$python" -m venv "$np2"
fi
if ! "$np2/bin/python" -c "import numpy, pytest, sys; sys.exit(int(numpy.__version__.split('.')[0]) < 2)" 2>/dev/null; then
  "$np2/bin/pip" install -q "numpy>=2.1" pytest
fi
"$np2/bin/pip" install -q --force-reinstall --no-deps "${wheel[0]}"
echo "== python: DLPack tests with NumPy $("$np2/bin/python" -c 'import numpy; print(numpy.__version__)') (versioned capsules) =="
(cd "$build" && "$np2/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests/test_dlpack.py")
