#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build one output of recipe.yaml; RESHARD_OUTPUT (set by the recipe's
# build.script.env) says which: lib, mpi, nccl, tools or python.
#
# Every C output configures the whole CMake project with only what it needs
# switched on, runs `cmake --install` into a staging folder of its own, and
# copies its own files from there into $PREFIX. So each package holds
# exactly the files `cmake --install` makes for it (the file lists in
# recipe.yaml, which ctest packaging.conda_recipe compares with a real
# install), and no output re-ships another's files.
set -euxo pipefail

out="${RESHARD_OUTPUT:?RESHARD_OUTPUT must be lib, mpi, nccl, tools or python}"
build="$SRC_DIR/_build/$out"
stage="$SRC_DIR/_stage/$out"

# Off unless the output asks for it: tests, benchmarks, bindings, the
# command-line tools, and both transport modules (MPI would otherwise be
# picked up whenever an MPI happens to be findable).
common=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_INSTALL_PREFIX="$stage"
  -DCMAKE_INSTALL_LIBDIR=lib
  -DCMAKE_INSTALL_INCLUDEDIR=include
  -DCMAKE_INSTALL_MANDIR=share/man
  -DBUILD_TESTING=OFF
  -DRESHARD_BUILD_TESTS=OFF
  -DRESHARD_BUILD_BENCH=OFF
  -DRESHARD_BUILD_BINDINGS=OFF
  -DRESHARD_BUILD_TOOLS=OFF
  -DRESHARD_WITH_NCCL=OFF
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
)

configure_build_stage() {
  # CMAKE_ARGS (conda-forge's toolchain settings) first, ours after it.
  # shellcheck disable=SC2086
  cmake -S "$SRC_DIR" -B "$build" ${CMAKE_ARGS:-} "${common[@]}" "$@"
  cmake --build "$build" --parallel "${CPU_COUNT:-2}"
  rm -rf "$stage"
  cmake --install "$build"
}

# Copy paths (relative to the staging prefix, globs allowed) into $PREFIX,
# symlinks as symlinks; fail when a pattern matches nothing.
ship() {
  local pattern path
  for pattern in "$@"; do
    local matched=0
    for path in "$stage"/$pattern; do
      [ -e "$path" ] || [ -L "$path" ] || continue
      matched=1
      local rel="${path#"$stage"/}"
      mkdir -p "$PREFIX/$(dirname "$rel")"
      cp -RP "$path" "$PREFIX/$rel"
    done
    [ "$matched" = 1 ] || { echo "cmake --install made no $pattern" >&2; exit 1; }
  done
}

case "$out" in
  lib)
    configure_build_stage
    ship 'lib/libreshard.so' 'lib/libreshard.so.*' 'lib/libreshard.a' \
      'include/reshard' 'lib/pkgconfig/reshard.pc' 'lib/cmake/reshard'
    ;;
  mpi)
    configure_build_stage -DCMAKE_DISABLE_FIND_PACKAGE_MPI=OFF \
      -DRESHARD_REQUIRE_MPI=ON -DMPI_C_COMPILER="$PREFIX/bin/mpicc"
    ship 'lib/libreshard-mpi.so.*'
    ;;
  nccl)
    # The project's architectures (RESHARD_CUDA_ARCHITECTURES, 80;90;100)
    # unless the environment names others.
    arch=()
    [ -n "${RESHARD_CUDA_ARCHITECTURES:-}" ] &&
      arch=(-DRESHARD_CUDA_ARCHITECTURES="$RESHARD_CUDA_ARCHITECTURES")
    configure_build_stage -DRESHARD_WITH_NCCL=ON -DNCCL_ROOT="$PREFIX" \
      ${arch[@]+"${arch[@]}"}
    ship 'lib/libreshard-nccl.so.*'
    ;;
  tools)
    configure_build_stage -DRESHARD_BUILD_TOOLS=ON
    ship 'bin/reshard' 'share/reshard/clusters' 'share/man/man1/reshard.1'
    ;;
  python)
    # The extension links the libreshard output in $PREFIX (never a copy
    # of its own): RESHARD_PYTHON_LIBRARY=system.
    "$PYTHON" -m pip install "$SRC_DIR/bindings/python" -vv --no-deps \
      --no-build-isolation \
      --config-settings=cmake.define.RESHARD_PYTHON_LIBRARY=system \
      --config-settings=cmake.define.CMAKE_PREFIX_PATH="$PREFIX"
    ;;
  *)
    echo "unknown RESHARD_OUTPUT '$out'" >&2
    exit 1
    ;;
esac
