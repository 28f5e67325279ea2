#!/usr/bin/env bash
# Creates (or reuses) the Python virtual environment with the reference MXNet 1.9.1 used by the
# MXNet comparison stage: numpy 1.23.5 and mxnet 1.9.1 (the CPU wheel, built with MKL-DNN) from
# PyPI, installed with the system python3 (3.11; the mxnet 1.9.1 wheel supports no later Python).
#
#   tests/mxnet/setup_venv.sh [VENV_DIR]      (default: build/mxnet-venv under the repository)
#
# Idempotent: a venv that already imports the pinned versions is reused without any network access.
# Exit status: 0 ready (prints the venv's python on the last line of stdout); 77 skip: PyPI cannot be
# reached (the reason is printed); anything else is an error.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:-$root/build/mxnet-venv}"
numpy_version=1.23.5
mxnet_version=1.9.1
python="${PYTHON:-python3}"

check_venv() {
  [ -x "$venv/bin/python" ] || return 1
  "$venv/bin/python" - "$numpy_version" "$mxnet_version" <<'EOF' >/dev/null 2>&1
import sys
import numpy, mxnet
sys.exit(0 if (numpy.__version__, mxnet.__version__) == (sys.argv[1], sys.argv[2]) else 1)
EOF
}

if check_venv; then
  echo "mxnet venv: reusing $venv (numpy $numpy_version, mxnet $mxnet_version)"
  echo "$venv/bin/python"
  exit 0
fi

command -v "$python" >/dev/null || { echo "mxnet venv: no $python on PATH" >&2; exit 1; }
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
case "$py_version" in
  3.7 | 3.8 | 3.9 | 3.10 | 3.11) ;;
  *) echo "mxnet venv: $python is Python $py_version; mxnet $mxnet_version needs Python 3.7-3.11" >&2; exit 1 ;;
esac

# Can the package index be reached? pip's configured index (PIP_INDEX_URL or pip.conf), else PyPI;
# a short timeout so that an offline machine skips quickly.
index="${PIP_INDEX_URL:-$("$python" -m pip config get global.index-url 2>/dev/null || true)}"
index="${index:-https://pypi.org/simple}"
if ! reason="$("$python" - "${index%/}/mxnet/" <<'EOF' 2>&1
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=15) as r:
        r.read(1)
except Exception as e:  # any failure to reach the index means: skip
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
EOF
)"; then
  echo "mxnet venv: SKIP: the package index ${index%/}/mxnet/ cannot be reached ($reason)"
  exit 77
fi

echo "mxnet venv: creating $venv with numpy==$numpy_version mxnet==$mxnet_version ($python, Python $py_version)"
mkdir -p "$(dirname "$venv")"
"$python" -m venv --clear "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "numpy==$numpy_version" "mxnet==$mxnet_version"
if ! check_venv; then
  echo "mxnet venv: $venv was installed but does not import numpy $numpy_version and mxnet $mxnet_version" >&2
  "$venv/bin/python" -c 'import numpy, mxnet; print(numpy.__version__, mxnet.__version__)' >&2 || true
  exit 1
fi
echo "mxnet venv: ready"
echo "$venv/bin/python"
