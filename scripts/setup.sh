#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what building and testing libreshard needs (Debian 12). Safe to
# run again; does nothing but apt when everything is there.
set -euo pipefail
packages=(cmake gcc g++ make pkg-config libcriterion-dev libopenmpi-dev openmpi-bin
  libjson-c-dev libxxhash-dev
  clang libclang-rt-14-dev llvm valgrind abigail-tools python3-yaml
  swig python3-dev python3-venv python3-pip python3-numpy python3-pytest
  python3-mpi4py python3-torch golang-go lua5.4 liblua5.4-dev lua-busted)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  $sudo apt-get install -y "${missing[@]}"
fi
/usr/bin/python3 -c 'import ml_dtypes' 2>/dev/null || /usr/bin/python3 -m pip install -q --break-system-packages 'ml_dtypes==0.5.4' # test_convert's reference; 0.5.x keeps Debian's numpy 1.x
