#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run one fault mode under mpirun and judge it from what the ranks print.
#
#   run_fault.sh EXPECTED_PASSES LIMIT_S CHECK_RC mpirun ARGS...
#
# Passes when exactly EXPECTED_PASSES lines start with FAULT-PASS (one per
# rank alive at the end), none with FAULT-FAIL, the run ended within
# LIMIT_S seconds (a hang is killed and fails), and, when CHECK_RC is 1,
# mpirun exited 0. When a process dies on purpose, mpirun's own exit status
# says so and is not the verdict (CHECK_RC 0).
expected=$1
limit=$2
check_rc=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout -k 5 "$limit" "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
# Open MPI's notes about the process that left without MPI_Finalize are
# expected here; keep the log short.
grep -v -e 'PMIX ERROR: BAD-PARAM' "$out"
passes=$(grep -c '^FAULT-PASS' "$out")
fails=$(grep -c '^FAULT-FAIL' "$out")
verdict=ok
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "run_fault: HANG: still running after ${limit} s, killed ($passes of $expected ranks had reported)"
  verdict=fail
fi
if [ "$fails" -ne 0 ]; then
  echo "run_fault: $fails rank(s) reported FAULT-FAIL"
  verdict=fail
fi
if [ "$passes" -ne "$expected" ]; then
  # which ranks spoke: a process that vanished (a signal, an exit inside
  # MPI) prints nothing, and mpirun --enable-recovery may still exit 0
  said=$(sed -n 's/^FAULT-[A-Z]* mode=[^ ]* rank=\([0-9]*\).*/\1/p' "$out" |
    sort -n | tr '\n' ' ' | sed 's/ $//')
  echo "run_fault: $passes FAULT-PASS lines, want $expected (ranks that" \
    "reported: ${said:-none})"
  verdict=fail
fi
if [ "$check_rc" = 1 ] && [ "$rc" -ne 0 ]; then
  echo "run_fault: mpirun exited $rc"
  verdict=fail
fi
echo "run_fault: $verdict in ${elapsed} s (mpirun exit $rc, $passes passes)"
[ "$verdict" = ok ]
