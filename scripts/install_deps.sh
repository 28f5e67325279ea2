#!/usr/bin/env bash
# Installs the Debian packages weft needs that are not installed yet. Idempotent; a no-op when
# everything is present. Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libtbb-dev libdnnl-dev libdlpack-dev libboost-dev
  libjpeg62-turbo-dev libpng-dev
  openmpi-bin libopenmpi-dev
  python3-dev python3-venv python3-numpy python3-pytest python3-torch python3-matplotlib
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "weft: installing missing Debian packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
