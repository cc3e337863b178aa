#!/usr/bin/env bash
# Set up, build with warnings as errors, check the install, run every test.
# The last lines are ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=build/test
# CI has CUDA and NCCL (but no GPU): there the NCCL module must build.
nccl=AUTO
[ "${CI:-}" = true ] && nccl=ON
cmake -S . -B "$build" -DRESHARD_WERROR=ON -DRESHARD_REQUIRE_MPI=ON \
  -DRESHARD_WITH_NCCL=$nccl \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$(nproc)"
# The installed library and headers work for a program built outside the tree.
prefix="$(pwd)/$build/install"
cmake --install "$build" --prefix "$prefix" >/dev/null
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -std=c11 -Wall -Werror \
  examples/quickstart.c $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs reshard) \
  -Wl,-rpath,"$prefix/lib" -o "$build/quickstart-installed"
"$build/quickstart-installed"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
