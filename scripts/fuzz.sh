#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined)
# in build/fuzz and run each for a bounded time, starting from its
# committed corpus tests/fuzz/corpus/<target>/ (read only; new inputs go to
# build/fuzz/work/<target>/). A crash, a sanitizer report, a broken
# invariant, a timeout (10 s per input) or running out of memory (2 GiB)
# fails the script; libFuzzer leaves the input in build/fuzz/work/artifacts/.
# To keep it: minimize it (<target> -minimize_crash=1 -runs=10000 FILE),
# copy it into tests/fuzz/regress/<target>/ named after what it was, fix
# the bug, and ctest replays it from then on (fuzz.replay.<target>); this
# script runs the regressions of each target before fuzzing it.
#
#   FUZZ_SECONDS=60 bash scripts/fuzz.sh           # each target for 60 s
#   bash scripts/fuzz.sh --merge                   # then fold what was new
#                                                  # into the corpus
#   bash scripts/fuzz.sh fuzz_plan                 # one target
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
seconds=${FUZZ_SECONDS:-60}
merge=0
targets=()
for a in "$@"; do
  case $a in
    --merge) merge=1 ;;
    fuzz_*) targets+=("$a") ;;
    *) echo "usage: $0 [--merge] [fuzz_wire|fuzz_layout|fuzz_plan]..." >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_wire fuzz_layout fuzz_plan)

build=build/fuzz
CC=clang cmake -S . -B "$build" -DRESHARD_FUZZ=ON -DRESHARD_BUILD_BENCH=OFF \
  -DRESHARD_WITH_NCCL=OFF -DRESHARD_BUILD_BINDINGS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
work=$build/work
mkdir -p "$work/artifacts"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

failed=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  log=$work/$t.log
  # Inputs that once crashed: each must pass before fuzzing means much.
  if [ -d "tests/fuzz/regress/$t" ]; then
    if ! "$build/tests/fuzz/$t" -runs=0 -artifact_prefix="$work/artifacts/regress-$t-" \
        "tests/fuzz/regress/$t" \
        >"$work/$t.regress.log" 2>&1; then
      failed=1
      summary+=("$t: a regression input in tests/fuzz/regress/$t still fails (see $work/$t.regress.log)")
      grep -E 'ERROR|SUMMARY|invariant|runtime error' "$work/$t.regress.log" | head -5
    fi
  fi
  echo "== $t: ${seconds} s from $(ls tests/fuzz/corpus/$t | wc -l) corpus files"
  rc=0
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" "$work/$t" "tests/fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+.*(INITED|DONE)|ERROR|SUMMARY|invariant|^artifact_prefix|Test unit written' "$log" || true
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  new=$(awk '/stat::new_units_added/ {print $2}' "$log")
  rss=$(awk '/stat::peak_rss_mb/ {print $2}' "$log")
  if [ "$rc" -ne 0 ]; then
    failed=1
    summary+=("$t: FAILED (exit $rc) after ${execs:-?} executions; see $log and $work/artifacts/")
    tail -n 40 "$log"
  else
    summary+=("$t: ${execs:-?} executions in ${seconds} s, ${cov:-?} coverage points, ${new:-?} new inputs, peak RSS ${rss:-?} MB, no crash")
  fi
  if [ "$merge" -eq 1 ] && [ "$rc" -eq 0 ]; then
    "$build/tests/fuzz/$t" -merge=1 "tests/fuzz/corpus/$t" "$work/$t" \
      >"$work/$t.merge.log" 2>&1
    echo "$t: corpus now $(ls tests/fuzz/corpus/$t | wc -l) files"
  fi
done
echo "fuzz summary ($(clang --version | head -1)):"
printf '  %s\n' "${summary[@]}"
exit $failed
