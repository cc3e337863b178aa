#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build libreshard and its whole test suite with clang's AddressSanitizer
# and UndefinedBehaviorSanitizer in build/asan, and run every ctest entry
# (unit, property, bad-input catalog, fuzz corpus replay, MPI integration,
# fault and soak tests) under them. Any sanitizer report fails the run:
# UBSan aborts on the first finding, ASan on the first error, LeakSanitizer
# fails a process that leaks. Leaks inside Open MPI itself are suppressed
# by tests/lsan.supp (see the comment there); nothing of libreshard's is.
# Extra arguments go to ctest (for example -R fault).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=build/asan
# The sanitizer runtime as a shared library: libreshard.so is linked with
# --no-undefined and its MPI module is loaded with dlopen, so both must
# find the runtime the executables use.
rtdir="$(clang -print-resource-dir)/lib/linux"
san="-fsanitize=address,undefined -shared-libsan"
flags="$san -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
link="$san -Wl,-rpath,$rtdir"
# Without the NCCL module: nvcc's host compiler takes no sanitizer link
# flags, and its code needs a GPU to run; scripts/test.sh builds it, and
# test_pieces here compiles its index math into the (sanitized) test.
# Without the language bindings: their interpreters (python3, go, lua) are
# not built with the sanitizer runtime.
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug \
  -DRESHARD_WITH_NCCL=OFF -DRESHARD_BUILD_BINDINGS=OFF -DRESHARD_BUILD_BENCH=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" \
  -DCMAKE_MODULE_LINKER_FLAGS="$link" >/dev/null
cmake --build "$build" -j"$(nproc)"

# Programs the tests compile themselves (the README example) with `cc`
# must be built the same way to link against the instrumented library.
mkdir -p "$build/san-bin"
cat >"$build/san-bin/cc" <<EOS
#!/bin/sh
exec clang $san -Wl,-rpath,$rtdir "\$@"
EOS
chmod +x "$build/san-bin/cc"
export PATH="$(pwd)/$build/san-bin:$PATH"

# Open MPI unloads its components (mca_*.so) at MPI_Finalize; LeakSanitizer
# runs later and can no longer name the module of a leaked allocation, so
# no suppression could match it. For this run dlclose does nothing.
printf 'int dlclose(void *handle);\nint dlclose(void *handle) { (void)handle; return 0; }\n' \
  >"$build/san-bin/keep_dlopened.c"
clang -shared -fPIC -O1 -o "$build/san-bin/libkeep_dlopened.so" \
  "$build/san-bin/keep_dlopened.c"
export LD_PRELOAD="$(pwd)/$build/san-bin/libkeep_dlopened.so"

supp="$(pwd)/tests/lsan.supp"
# detect_leaks: LeakSanitizer at every exit. abort_on_error: a finding
# kills the process with SIGABRT, so a test cannot ignore it.
# verify_asan_link_order=0: the dlclose shim is preloaded ahead of the
# runtime. fast_unwind_on_malloc=0: Open MPI and glibc are built without
# frame pointers; the slow unwinder still finds whose allocation it was.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:verify_asan_link_order=0:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Open MPI's memory hooks patch the allocator that ASan also intercepts.
export OMPI_MCA_memory="^patcher"
# cli.plan_digests (label slow) plans every catalog configuration again:
# minutes under the sanitizers, and scripts/test.sh runs it.
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -LE slow "$@"
