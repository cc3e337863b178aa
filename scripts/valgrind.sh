#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run a representative subset of the tests under valgrind memcheck: the
# bad-input catalog (every API area), the API, wire-format and in-process
# execution suites (Criterion, one worker at a time, followed across its
# fork/exec with --trace-children=yes), the README quickstart, the fuzz
# seeds, and MPI runs (soak, a layout mismatch, a corrupted message) with
# valgrind under every process. Any memcheck error or leak fails the run
# (--error-exitcode=1, definite, indirect and possible leaks all count).
# Leaks inside Open MPI itself are suppressed (tests/valgrind-openmpi.supp
# says which and why) together with Open MPI's own suppression file.
# Builds in build/valgrind. VALGRIND_JOBS (default: the number of cores)
# runs that many parts at once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
command -v valgrind >/dev/null || {
  echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2
  exit 1
}
build=build/valgrind
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-O1 -g" \
  -DRESHARD_BUILD_BENCH=OFF -DRESHARD_BUILD_BINDINGS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
root="$(pwd)"
logs="$build/valgrind-logs"
rm -rf "$logs"
mkdir -p "$logs"

# Open MPI unloads its components at MPI_Finalize, after which memcheck can
# no longer name their frames and no suppression can match them; during
# this run dlclose does nothing.
printf 'int dlclose(void *handle);\nint dlclose(void *handle) { (void)handle; return 0; }\n' \
  >"$build/keep_dlopened.c"
cc -shared -fPIC -O1 -o "$build/libkeep_dlopened.so" "$build/keep_dlopened.c"

vg=(valgrind --error-exitcode=1 --leak-check=full --num-callers=40
  --show-leak-kinds=definite,indirect,possible
  --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes
  --trace-children=yes --suppressions="$root/tests/valgrind-openmpi.supp")
[ -f /usr/share/openmpi/openmpi-valgrind.supp ] &&
  vg+=(--suppressions=/usr/share/openmpi/openmpi-valgrind.supp)
mpirun_flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)
export RESHARD_MPI_MODULE="$root/$build/lib/libreshard-mpi.so.0"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi_vg=(mpirun "${mpirun_flags[@]}" -x LD_PRELOAD="$root/$build/libkeep_dlopened.so"
  -x RESHARD_MPI_MODULE -x OMPI_MCA_btl_vader_single_copy_mechanism)

# name|command (run from the build folder)
parts=()
for t in bad_layout bad_context bad_settings bad_plan bad_buffers bad_wire \
    bad_lifetime bad_mpi_entry test_exec test_api test_wire; do
  parts+=("$t|${vg[*]} tests/unit/$t --jobs=1")
done
parts+=(
  "quickstart|${vg[*]} examples/quickstart"
  "fuzz_seeds|for t in fuzz_wire fuzz_layout fuzz_plan; do ${vg[*]} tests/fuzz/\${t}_replay $root/tests/fuzz/corpus/\$t/seed-* || exit 1; done"
)
if [ -x "$build/tests/soak/rel_soak" ]; then
  parts+=(
    "mpi_soak|${mpi_vg[*]} -np 2 ${vg[*]} tests/soak/rel_soak --iterations 30 --tolerance-kib 1000000"
    "mpi_other_layout|sh $root/tests/mpi/run_fault.sh 3 300 1 ${mpi_vg[*]} -np 3 ${vg[*]} tests/mpi/mpi_victim other_layout --timeout-ms 20000"
    "mpi_corrupt|sh $root/tests/mpi/run_fault.sh 3 300 1 ${mpi_vg[*]} -np 3 ${vg[*]} tests/mpi/mpi_victim corrupt --timeout-ms 20000"
  )
fi

run_part() {
  local name=${1%%|*} cmd=${1#*|} start rc
  start=$(date +%s)
  (cd "$build" && eval "$cmd") >"$logs/$name.log" 2>&1 && rc=0 || rc=$?
  printf '%-22s %s  %4d s\n' "$name" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" \
    "$(( $(date +%s) - start ))" >"$logs/$name.result"
  return 0
}
export -f run_part
export build logs

printf '%s\n' "${parts[@]}" | xargs -d '\n' -P "${VALGRIND_JOBS:-$(nproc)}" -I{} \
  bash -c 'run_part "$1"' _ {}

echo "valgrind memcheck ($(valgrind --version)):"
failed=0
for p in "${parts[@]}"; do
  name=${p%%|*}
  cat "$logs/$name.result"
  if grep -q FAIL "$logs/$name.result"; then
    failed=1
    echo "---- $logs/$name.log (last 60 lines)"
    tail -n 60 "$logs/$name.log"
  fi
done
exit $failed
