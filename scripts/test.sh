#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set up, build with warnings as errors, check the install, run every test.
# The last lines are ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=build/test
# CI has CUDA and NCCL (but no GPU): there the NCCL module and every
# language binding must build.
nccl=AUTO
bindings=OFF
[ "${CI:-}" = true ] && nccl=ON && bindings=ON
cmake -S . -B "$build" -DRESHARD_WERROR=ON -DRESHARD_REQUIRE_MPI=ON \
  -DRESHARD_WITH_NCCL=$nccl -DRESHARD_REQUIRE_BINDINGS=$bindings \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$(nproc)"
# The installed library and headers work for a program built outside the tree.
prefix="$(pwd)/$build/install"
cmake --install "$build" --prefix "$prefix" >/dev/null
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -std=c11 -Wall -Werror \
  examples/quickstart.c $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs reshard) \
  -Wl,-rpath,"$prefix/lib" -o "$build/quickstart-installed"
# On CI, the Python package installs with pip against the installed library
# (scikit-build-core from PyPI) and imports from outside the tree.
if [ "$bindings" = ON ]; then
  rm -rf "$build/pyvenv"
  /usr/bin/python3 -m venv --system-site-packages "$build/pyvenv"
  CMAKE_PREFIX_PATH="$prefix" "$build/pyvenv/bin/pip" install -q \
    --config-settings=cmake.define.RESHARD_PYTHON_LIBRARY=system ./bindings/python
  py="$(pwd)/$build/pyvenv/bin/python"
  (cd / && "$py" -c 'import reshard
with reshard.Context.local(2) as ctx:
    assert ctx.world_size == 2
print("pip-installed reshard", reshard.__version__, "imports and runs")')
fi
"$build/quickstart-installed"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
