#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libreshard's GPU check, in one go, on a machine with one NVIDIA GPU:
#   bash bench/gpu/check.sh            (from anywhere; it works in the repo)
# Steps, each under `timeout`, each timed:
#   1 nvidia-smi -L
#   2 configure (CMake; Ninja if present; Release; the NCCL module for sm_90)
#   3 build the targets reshard reshard_nccl nccl_reshard
#   4 build bench/gpu/pack_check with nvcc (the `// build:` lines of its
#     header comment if it has any, else the recipe written there)
#   5 run pack_check     (the CUDA copy and conversion kernels:
#     correctness, bandwidth)
#   6 run nccl_reshard   (the NCCL transport through the public API)
# then a summary of the steps and the tables of both programs again.
# Logs: build/gpucheck/logs/ (and copied to "$OUT" when OUT is set).
# Exit status: 0 when every step passed; 77 when there is no GPU (the
# builds still run, the GPU steps are skipped); 1 otherwise.
#
# NCCL: a complete NCCL_ROOT (include/nccl.h and lib*/libnccl.so*) if set,
# else the system's (/usr/local/cuda, $CUDA_HOME, /usr), else the pip wheel
# nvidia-nccl-cu13 (python3 -c 'import nvidia.nccl'), whose lib folder may
# hold only libnccl.so.2: the library is passed to CMake by its full path.
# Configured without tests, tools and MPI (-DRESHARD_BUILD_TOOLS=OFF...),
# so that neither Criterion, json-c nor MPI is needed there.
#
# Settings (environment): RS_CHECK_BUDGET seconds for everything (290),
# RS_CHECK_JOBS (16), RS_CHECK_ARCH (90), RS_CHECK_BUILD (build/gpucheck),
# PACK_CHECK_ARGS (none), NCCL_RESHARD_ARGS (none), PACK_CHECK_SRC (for
# testing the `// build:` lines), RS_CHECK_NO_SYSTEM_NCCL=1
# (skip the system's NCCL; for testing the pip path).
set -u
set -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
BUDGET=${RS_CHECK_BUDGET:-290}
JOBS=${RS_CHECK_JOBS:-16}
ARCH=${RS_CHECK_ARCH:-90}
TOP=${RS_CHECK_BUILD:-build/gpucheck}
case "$TOP" in /*) ;; *) TOP="$ROOT/$TOP" ;; esac
BUILD="$TOP/cmake"
PACK="$TOP/pack"
LOGS="$TOP/logs"
now() { date +%s%N; } # nanoseconds; plain bash arithmetic below, no awk
T_START=$(now)

mkdir -p "$LOGS" "$PACK" || exit 1
rm -f "$LOGS"/*.log "$LOGS"/summary.txt

since() { # seconds since $1, one decimal
  local d=$(( ($(now) - $1) / 100000000 ))
  echo "$((d / 10)).$((d % 10))"
}
left() { echo $(( BUDGET - ($(now) - T_START) / 1000000000 )); }
min() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }

STEP_NAMES=()
STEP_STATUS=()
STEP_SECS=()
FAILED=0
NO_GPU=0

record() { # name status seconds
  STEP_NAMES+=("$1")
  STEP_STATUS+=("$2")
  STEP_SECS+=("$3")
  printf '== [%s] %s (%s s)\n' "$2" "$1" "$3"
}

# run_step NAME LOGFILE TIMEOUT RESERVE COMMAND...: runs the command under
# `timeout`, capped so that RESERVE seconds of the budget stay for later
# steps; output to the terminal and the log.
run_step() {
  local name=$1 log="$LOGS/$2" want=$3 reserve=$4
  shift 4
  local avail
  avail=$(( $(left) - reserve ))
  local t
  t=$(min "$want" "$avail")
  echo
  echo "== step: $name (timeout ${t} s; $(left) s of the budget left)"
  echo "   \$ $*"
  if [ "$t" -lt 5 ]; then
    echo "   no time left in the budget of $BUDGET s: skipped" | tee "$log"
    record "$name" "FAIL: no time" 0
    FAILED=1
    return 1
  fi
  local t0 rc
  t0=$(now)
  timeout -k 10 "$t" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local secs
  secs=$(since "$t0")
  if [ "$rc" -eq 0 ]; then
    record "$name" "ok" "$secs"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "   TIMED OUT after $t s" | tee -a "$log"
    record "$name" "FAIL: timeout ${t}s" "$secs"
    FAILED=1
  else
    record "$name" "FAIL: exit $rc" "$secs"
    FAILED=1
  fi
  return "$rc"
}

skip_step() {
  echo
  echo "== step: $1: SKIPPED ($2)"
  record "$1" "SKIP" 0
}

print_tables() {
  echo
  echo "################################################################"
  echo "== steps (budget $BUDGET s, $(since "$T_START") s used)"
  local i
  for i in "${!STEP_NAMES[@]}"; do
    printf '   %-42s %-20s %8s s\n' "${STEP_NAMES[$i]}" "${STEP_STATUS[$i]}" \
      "${STEP_SECS[$i]}"
  done
  if [ -s "$LOGS/5-pack_check.log" ]; then
    echo
    echo "== pack_check (from $LOGS/5-pack_check.log)"
    if grep -q '^correctness:' "$LOGS/5-pack_check.log"; then
      sed -n '/^correctness:/,$p' "$LOGS/5-pack_check.log"
    else
      tail -n 60 "$LOGS/5-pack_check.log"
    fi
  fi
  if [ -s "$LOGS/6-nccl_reshard.log" ]; then
    echo
    if grep -q '^== libreshard GPU check ==' "$LOGS/6-nccl_reshard.log"; then
      sed -n '/^== libreshard GPU check ==/,$p' "$LOGS/6-nccl_reshard.log"
    else
      echo "== nccl_reshard printed no table; its last lines:"
      tail -n 30 "$LOGS/6-nccl_reshard.log"
    fi
  fi
  echo
}

FINISHED=0
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  local code=0 verdict="PASS"
  if [ "$FAILED" = 1 ]; then
    code=1
    verdict="FAIL"
  elif [ "$NO_GPU" = 1 ]; then
    code=77
    verdict="NO GPU (builds checked; GPU steps skipped)"
  fi
  print_tables 2>&1 | tee "$LOGS/summary.txt"
  echo "GPU CHECK RESULT: $verdict (exit $code; logs in $LOGS)" |
    tee -a "$LOGS/summary.txt"
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp -f "$LOGS"/* "$OUT"/ 2>/dev/null &&
      echo "(logs copied to $OUT)"
  fi
  exit "$code"
}
on_signal() {
  echo
  echo "check.sh: interrupted"
  FAILED=1
  finish
}
trap on_signal INT TERM

# ---- 0: the machine ---------------------------------------------------------
echo "== libreshard GPU check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname 2>/dev/null || cat /etc/hostname 2>/dev/null)"
echo "   repo $ROOT; build $TOP; budget $BUDGET s; -j$JOBS; sm_$ARCH"
echo "   $(uname -srm); $(nproc) cores"
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
NVCC=$(command -v nvcc || true)
CUDA_HOME_GUESS=""
[ -n "$NVCC" ] && CUDA_HOME_GUESS=$(cd "$(dirname "$NVCC")/.." && pwd)
echo "   nvcc: ${NVCC:-MISSING} $( [ -n "$NVCC" ] && timeout 20 nvcc --version | tail -n 1)"
echo "   cmake: $(command -v cmake || echo MISSING) $(timeout 10 cmake --version 2>/dev/null | head -n 1)"
echo "   ninja: $(command -v ninja || echo 'not found (Unix Makefiles then)')"
echo "   cc: $(command -v cc || echo MISSING) $(cc --version 2>/dev/null | head -n 1)"
echo "   python3: $(command -v python3 || echo MISSING)"

# ---- 1: the GPU -------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  if run_step "nvidia-smi -L" 1-nvidia-smi.log 30 0 nvidia-smi -L &&
    grep -q '^GPU ' "$LOGS/1-nvidia-smi.log"; then
    :
  else
    NO_GPU=1
    # no driver is not a failure of the check itself: say so and go on
    # building, so that the build is checked on a machine without a GPU
    FAILED=0
    STEP_STATUS[${#STEP_STATUS[@]}-1]="NO GPU"
  fi
else
  echo "no nvidia-smi on PATH" | tee "$LOGS/1-nvidia-smi.log"
  record "nvidia-smi -L" "NO GPU" 0
  NO_GPU=1
fi
if [ "$NO_GPU" = 1 ] && ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "nvidia-smi lists no GPU, but /dev/nvidia[0-9]* exist: running the GPU steps anyway" |
    tee -a "$LOGS/1-nvidia-smi.log"
  NO_GPU=0
  STEP_STATUS[${#STEP_STATUS[@]}-1]="no list; /dev/nvidia*"
fi
if [ "$NO_GPU" = 1 ]; then
  echo
  echo "!!! NO GPU: nvidia-smi lists no GPU (no driver or no device). The"
  echo "!!! configure and build steps run; pack_check and nccl_reshard are"
  echo "!!! skipped."
fi

# ---- NCCL -------------------------------------------------------------------
MULTI="$(uname -m)-linux-gnu"
NCCL_INC="" NCCL_LIB="" NCCL_FROM=""
try_nccl_root() { # root [from]: sets NCCL_INC/NCCL_LIB when complete
  local r=$1 inc="" lib="" c
  [ -n "$r" ] && [ -d "$r" ] || return 1
  for c in "$r/include" "$r/targets/$(uname -m)-linux/include"; do
    [ -f "$c/nccl.h" ] && inc=$c && break
  done
  for c in "$r/lib64/libnccl.so.2" "$r/lib/libnccl.so.2" \
    "$r/lib/$MULTI/libnccl.so.2" "$r/targets/$(uname -m)-linux/lib/libnccl.so.2" \
    "$r/lib64/libnccl.so" "$r/lib/libnccl.so" "$r/lib/$MULTI/libnccl.so"; do
    [ -e "$c" ] && lib=$c && break
  done
  [ -n "$inc" ] && [ -n "$lib" ] || return 1
  NCCL_INC=$inc
  NCCL_LIB=$(readlink -f "$lib")
  NCCL_FROM=${2:-$r}
  return 0
}
pip_nccl_dir() {
  command -v python3 >/dev/null 2>&1 || return 1
  timeout 30 python3 - <<'EOF' 2>/dev/null
import os
import nvidia.nccl as m
f = getattr(m, "__file__", None)
print(os.path.dirname(f) if f else list(m.__path__)[0])
EOF
}
if [ -n "${NCCL_ROOT:-}" ] && try_nccl_root "$NCCL_ROOT" "NCCL_ROOT=$NCCL_ROOT"; then
  :
elif [ "${RS_CHECK_NO_SYSTEM_NCCL:-0}" != 1 ] &&
  { try_nccl_root "$CUDA_HOME_GUESS" || try_nccl_root "${CUDA_HOME:-}" ||
    try_nccl_root /usr/local/cuda || try_nccl_root /usr; }; then
  :
else
  PIPDIR=$(pip_nccl_dir || true)
  if [ -n "$PIPDIR" ]; then
    try_nccl_root "$PIPDIR" "pip wheel nvidia-nccl ($PIPDIR)" || true
  fi
fi
if [ -n "$NCCL_LIB" ]; then
  NCCL_LIBDIR=$(dirname "$NCCL_LIB")
  NCCL_VER=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$NCCL_INC/nccl.h" | head -n 3 | paste -sd. -)
  echo
  echo "== NCCL $NCCL_VER from $NCCL_FROM: header $NCCL_INC/nccl.h, library $NCCL_LIB"
else
  NCCL_LIBDIR=""
  echo
  echo "!!! NCCL not found (NCCL_ROOT, $CUDA_HOME_GUESS, /usr/local/cuda, /usr,"
  echo "!!! pip nvidia-nccl-cu13): configure will fail; set NCCL_ROOT."
fi

# ---- 2: configure -----------------------------------------------------------
SRC_DIR=$ROOT
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
rm -rf "$BUILD"
CONF=(cmake -S "$SRC_DIR" -B "$BUILD" "${GEN[@]}"
  -DCMAKE_BUILD_TYPE=Release
  -DRESHARD_WITH_NCCL=ON "-DRESHARD_CUDA_ARCHITECTURES=$ARCH")
CONF+=(-DRESHARD_BUILD_TESTS=OFF -DBUILD_TESTING=OFF -DRESHARD_BUILD_TOOLS=OFF
  -DRESHARD_REQUIRE_MPI=OFF -DRESHARD_BUILD_BENCH=ON)
[ -n "$NVCC" ] && CONF+=("-DCMAKE_CUDA_COMPILER=$NVCC")
[ -n "$NCCL_LIB" ] && CONF+=("-DNCCL_INCLUDE_DIR=$NCCL_INC" "-DNCCL_LIBRARY=$NCCL_LIB")
CONFIGURED=0
if run_step "configure (cmake)" 2-configure.log 150 0 "${CONF[@]}"; then
  CONFIGURED=1
else
  for f in CMakeFiles/CMakeError.log CMakeFiles/CMakeOutput.log; do
    [ -f "$BUILD/$f" ] && cp -f "$BUILD/$f" "$LOGS/2-$(basename "$f")"
  done
fi

# ---- 3: build ---------------------------------------------------------------
BUILT=0
if [ "$CONFIGURED" = 1 ]; then
  run_step "build reshard reshard_nccl nccl_reshard" 3-build.log 240 0 \
    cmake --build "$BUILD" --target reshard reshard_nccl nccl_reshard \
    -j "$JOBS" && BUILT=1
else
  skip_step "build reshard reshard_nccl nccl_reshard" "configure failed"
fi
MODULE="$BUILD/lib/libreshard-nccl.so.0"
NCCL_RESHARD="$BUILD/bench/nccl_reshard"

# ---- 4: build pack_check ----------------------------------------------------
PACK_SRC=${PACK_CHECK_SRC:-bench/gpu/pack_check.cu}
PACK_BIN="$PACK/pack_check"
PACK_BUILT=0
if [ ! -f "$PACK_SRC" ]; then
  skip_step "build pack_check (nvcc)" "$PACK_SRC does not exist"
  FAILED=1
  STEP_STATUS[${#STEP_STATUS[@]}-1]="FAIL: no source"
else
  BUILD_LINES=$(grep '^// build:' "$PACK_SRC" | sed 's|^// build:[[:space:]]*||')
  if [ -n "$BUILD_LINES" ]; then
    # The header's own commands; the binary is the last `-o` of the last.
    last=$(printf '%s\n' "$BUILD_LINES" | tail -n 1)
    PACK_BIN=""
    read -r -a words <<<"$last"
    for i in "${!words[@]}"; do
      [ "${words[$i]}" = "-o" ] && PACK_BIN=${words[$((i + 1))]:-}
    done
    PACK_BIN=${PACK_BIN//\'/}
    [ -z "$PACK_BIN" ] && PACK_BIN=build/gpu/pack_check
    printf '%s\n' "$BUILD_LINES" >"$PACK/build.sh"
    echo "== pack_check: building with the '// build:' lines of $PACK_SRC -> $PACK_BIN"
  else
    # The recipe written in pack_check.cu's header comment.
    {
      echo "set -e"
      OBJS=""
      for f in transport/nccl/pieces transport/nccl/convert_pieces copy/copy \
               copy/convert base/dtype base/grow base/error base/utf8; do
        echo "cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I core -I capi/include -c core/$f.c -o '$PACK/${f##*/}.o'"
        OBJS="$OBJS '$PACK/${f##*/}.o'"
      done
      echo "nvcc -O3 -std=c++17 -arch=sm_$ARCH -I core -I capi/include -I tests/common $PACK_SRC core/transport/nccl/pack.cu core/transport/nccl/convert_pack.cu$OBJS -o '$PACK_BIN'"
    } >"$PACK/build.sh"
  fi
  case "$PACK_BIN" in /*) ;; *) PACK_BIN="$ROOT/$PACK_BIN" ;; esac
  rm -f "$PACK_BIN"
  run_step "build pack_check (nvcc)" 4-build-pack_check.log 180 0 \
    bash -c "set -ex; cd '$ROOT'; . '$PACK/build.sh'" && [ -x "$PACK_BIN" ] &&
    PACK_BUILT=1
fi

# ---- 5, 6: run --------------------------------------------------------------
LDP="${NCCL_LIBDIR:+$NCCL_LIBDIR:}${CUDA_HOME_GUESS:+$CUDA_HOME_GUESS/lib64:}${LD_LIBRARY_PATH:-}"
LDP=${LDP%:}
STDBUF=()
command -v stdbuf >/dev/null 2>&1 && STDBUF=(stdbuf -oL -eL)
RUN_ENV=(env "LD_LIBRARY_PATH=$LDP"
  "RESHARD_NCCL_MODULE=$MODULE" "NCCL_DEBUG=${NCCL_DEBUG:-WARN}")
if [ "$NO_GPU" = 1 ]; then
  skip_step "run pack_check" "no GPU"
  skip_step "run nccl_reshard" "no GPU"
  finish
fi

if [ "$PACK_BUILT" = 1 ]; then
  # keep 100 s of the budget for nccl_reshard
  # shellcheck disable=SC2086
  run_step "run pack_check${PACK_CHECK_ARGS:+ $PACK_CHECK_ARGS}" \
    5-pack_check.log 150 100 \
    "${RUN_ENV[@]}" "${STDBUF[@]}" "$PACK_BIN" ${PACK_CHECK_ARGS:-}
else
  skip_step "run pack_check" "not built"
  FAILED=1
  STEP_STATUS[${#STEP_STATUS[@]}-1]="FAIL: not built"
fi

if [ "$BUILT" = 1 ] && [ -x "$NCCL_RESHARD" ]; then
  echo
  echo "== the NCCL module's libraries:"
  ldd "$MODULE" 2>&1 | grep -Ei 'nccl|cuda|not found' | sed 's/^/   /'
  T_RUN=$(min 180 "$(left)")
  WD=$((T_RUN - 10))
  [ "$WD" -lt 10 ] && WD=10
  # shellcheck disable=SC2086
  run_step "run nccl_reshard${NCCL_RESHARD_ARGS:+ $NCCL_RESHARD_ARGS}" \
    6-nccl_reshard.log 180 0 \
    "${RUN_ENV[@]}" "$NCCL_RESHARD" --watchdog "$WD" ${NCCL_RESHARD_ARGS:-}
else
  skip_step "run nccl_reshard" "not built"
  FAILED=1
  STEP_STATUS[${#STEP_STATUS[@]}-1]="FAIL: not built"
fi

finish
