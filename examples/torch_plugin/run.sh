#!/usr/bin/env bash
# The torch plugin example end to end: builds libweft_torch_plugin.so (a weft plugin whose
# operator runs libtorch), checks that it exports only weft's two entry points, and replays
# gelu_mlp-symbol.json with it, checking the output and the weight gradients against NumPy (and
# real MXNet 1.9.1 when its venv can be had).
#
#   examples/torch_plugin/run.sh BUILD_DIR
#
# BUILD_DIR: a weft build tree (its weft CLI is brought up to date here). The plugin is built in
# BUILD_DIR/examples/torch_plugin, the exchanged files go to BUILD_DIR/examples/torch_plugin/work.
# Installs libtorch-dev with apt-get when it is missing. WEFT_MXNET_VENV overrides the MXNet venv
# (default build/mxnet-venv, made by tests/mxnet/setup_venv.sh; without PyPI, the MXNet reference
# is skipped and the NumPy one still runs). Exit status: 0 pass, non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: examples/torch_plugin/run.sh BUILD_DIR}" && pwd)"
jobs="${WEFT_JOBS:-2}"
plugin_build="$build/examples/torch_plugin"
work="$plugin_build/work"

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "torch_plugin: installing libtorch-dev" >&2
  $sudo apt-get install -y -qq libtorch-dev >&2
fi

echo "== torch_plugin: build weft and the plugin =="
cmake --build "$build" -j "$jobs" --target weft_cli
cmake -S "$here" -B "$plugin_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_SOURCE_DIR="$root" >/dev/null
cmake --build "$plugin_build" -j "$jobs"
plugin="$plugin_build/libweft_torch_plugin.so"
weft="$build/tools/weft"

echo "== torch_plugin: exported symbols =="
exports="$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ')"
echo "$exports"
if [ "$exports" != "weft_plugin_abi_version weft_plugin_init " ]; then
  echo "torch_plugin: FAIL: the plugin must export exactly weft_plugin_abi_version and" \
    "weft_plugin_init" >&2
  exit 1
fi

echo "== torch_plugin: without --plugin the graph's operator is unknown =="
set +e
msg="$("$weft" info "$here/gelu_mlp-symbol.json" 2>&1)"
rc=$?
set -e
if [ "$rc" -eq 0 ] || ! grep -q "torch_gelu" <<<"$msg"; then
  echo "torch_plugin: FAIL: expected an error naming torch_gelu (exit $rc):" >&2
  echo "$msg" >&2
  exit 1
fi
grep "error" <<<"$msg" | head -1
"$weft" info --plugin "$plugin" "$here/gelu_mlp-symbol.json" | sed -n '2,20p'

echo "== torch_plugin: replay against the references =="
venv="${WEFT_MXNET_VENV:-$root/build/mxnet-venv}"
set +e
"$root/tests/mxnet/setup_venv.sh" "$venv"
rc=$?
set -e
py=""
mxnet_flag=()
if [ "$rc" -eq 0 ]; then
  py="$venv/bin/python"
else
  echo "torch_plugin: no MXNet venv (setup_venv.sh exit $rc): the MXNet reference is skipped" >&2
  mxnet_flag=(--no-mxnet)
  py=/usr/bin/python3
  if ! "$py" -c "import numpy" 2>/dev/null; then
    echo "torch_plugin: installing python3-numpy" >&2
    $sudo apt-get install -y -qq python3-numpy >&2
  fi
fi
"$py" "$here/check_gelu_mlp.py" --weft "$weft" --plugin "$plugin" --work "$work" \
  "${mxnet_flag[@]}"
