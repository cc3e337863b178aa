#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mpi.log: run an MPI program with RESHARD_DEBUG=INFO and one log file per
# process (RESHARD_DEBUG_FILE with %p); every process's file must hold the
# MPI module's own line (the module logs through the library's log) and
# its plan's.
# Usage: run_log.sh NP MPIEXEC [MPIEXEC ARGS...] -- PROGRAM [ARGS...]
set -eu
np="$1"
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
RESHARD_DEBUG=INFO RESHARD_DEBUG_FILE="$dir/log.%p" "$@"
files=$(ls "$dir" | wc -l)
module=$(grep -l "RESHARD INFO TRANSPORT: MPI transport: rank" "$dir"/log.* | wc -l)
plans=$(grep -l "RESHARD INFO PLAN: plan " "$dir"/log.* | wc -l)
echo "mpi.log: $files log files, $module with the module's line, $plans with a plan's"
if [ "$files" -ne "$np" ] || [ "$module" -ne "$np" ] || [ "$plans" -ne "$np" ]; then
  for f in "$dir"/log.*; do echo "== $f"; head -20 "$f"; done
  exit 1
fi
