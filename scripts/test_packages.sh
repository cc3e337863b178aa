#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the Debian packages of packaging/debian from a copy of this tree,
# lint them, install them, use each of them from a folder outside the tree
# with nothing of the source or build tree on any path, purge them and
# check that nothing is left. Debian 12; needs root or sudo (apt-get).
#
#   bash scripts/test_packages.sh
#
# Every step is timed and logged; the summary at the end lists them, with
# lintian's output. Exit status 0 when every step passed. 40-60 s on 2
# cores, NCCL module included (the package build is half of it).
#
# Environment: DEB_BUILD_PROFILES=pkg.libreshard.nonccl (build without the
# NCCL module; without it, libreshard-nccl0 is built where CUDA and NCCL
# are found), CUDA_HOME, NCCL_ROOT, CUDACXX (passed to the build);
# RESHARD_PKG_WORK=DIR (work there instead of a new temporary folder);
# RESHARD_PKG_KEEP=1 (keep the work folder, which holds the logs and the
# .deb files; it is kept anyway when a step failed).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
for f in capi/reshard.map packaging/debian/control scripts/test_packages.sh; do
  [ -f "$repo/$f" ] || { echo "test_packages.sh: $repo is not the libreshard tree (no $f)" >&2; exit 2; }
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

work="${RESHARD_PKG_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/reshard-pkg.XXXXXX")}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
case "$work/" in
  "$repo"/*) echo "test_packages.sh: the work folder $work is inside the source tree" >&2; exit 2 ;;
esac
chmod 755 "$work"   # apt's _apt user reads the .deb files from here
logs="$work/logs"
src="$work/src"              # the copy dpkg-buildpackage builds in
out="$work"                  # where it writes the .deb files
use="$work/consumer"         # the folder the installed packages are used from
rm -rf "$logs" "$src" "$use" "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo
mkdir -p "$logs" "$use" "$work/home"

# Only system folders on PATH, and no variable of the caller (no
# LD_LIBRARY_PATH, PYTHONPATH, LUA_PATH, RESHARD_*_MODULE, GOPATH, ...).
SYSPATH=/usr/sbin:/usr/bin:/sbin:/bin
clean() {
  env -i PATH="$SYSPATH" HOME="$work/home" LANG=C.UTF-8 TMPDIR=/tmp "$@"
}

names=() results=() times=() failed=0 total_start=$(date +%s.%N)
step() { # step NAME FUNCTION: run it, log it, time it
  local name=$1 fn=$2 start rc secs
  start=$(date +%s.%N)
  printf '==== %-16s ' "$name"
  ( set -euo pipefail; "$fn" ) > "$logs/$name.log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  names+=("$name") times+=("$secs")
  if [ $rc -eq 0 ]; then
    results+=(passed)
    echo "passed  ${secs} s"
  else
    results+=(FAILED)
    failed=$((failed + 1))
    echo "FAILED  ${secs} s (exit $rc; log: $logs/$name.log)"
    tail -n 40 "$logs/$name.log" | sed 's/^/    | /'
  fi
  return $rc
}
skip() {
  names+=("$1") results+=(skipped) times+=(-)
  printf '==== %-16s skipped (%s)\n' "$1" "$2"
}

version="$(sed -n 's/^#define RS_VERSION_\(MAJOR\|MINOR\|PATCH\) \+\([0-9]\+\) *$/\2/p' \
  "$repo/capi/include/reshard/reshard.h" | paste -sd.)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
libdir="/usr/lib/$multiarch"
packages=()   # the binary packages built (no -dbgsym)
debs=()

# Paths the packages install, which must not exist before the install nor
# after the purge.
owned_paths() {
  compgen -G "$libdir/libreshard*" || true
  local p
  for p in /usr/include/reshard "$libdir/cmake/reshard" \
      "$libdir/pkgconfig/reshard.pc" /usr/lib/python3/dist-packages/reshard \
      "$libdir/lua/5.4/reshard_swig.so" /usr/share/lua/5.4/reshard.lua \
      /usr/share/gocode/src/libreshard.dev /usr/share/reshard /usr/bin/reshard \
      /usr/share/man/man1/reshard.1.gz; do
    if [ -e "$p" ] || [ -L "$p" ]; then echo "$p"; fi
  done
  compgen -G "/usr/share/doc/*reshard*" || true
}

# ---- steps ------------------------------------------------------------------

s_deps() {
  local pkg missing=()
  for pkg in dpkg-dev debhelper dh-python lintian fakeroot build-essential \
      cmake pkg-config libjson-c-dev libxxhash-dev libopenmpi-dev openmpi-bin \
      swig python3-dev python3-numpy python3-mpi4py lua5.4 liblua5.4-dev \
      golang-go man-db; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "every tool is installed"
  fi
}

s_build() {
  # dpkg-buildpackage wants debian/ at the top: build in a copy.
  mkdir -p "$src"
  tar -C "$repo" -cf - --exclude=./.git --exclude=./build --exclude='./build-*' \
    --exclude=./_build --exclude=./out --exclude=./debian --exclude=__pycache__ . \
    | tar -C "$src" -xf -
  cp -a "$src/packaging/debian" "$src/debian"
  local deb_version
  deb_version="$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)"
  echo "package version $deb_version, header version $version"
  [ "${deb_version%-*}" = "$version" ] || {
    echo "debian/changelog says $deb_version, reshard.h says $version" >&2; return 1; }
  cd "$src"
  dpkg-checkbuilddeps
  local pass=() v
  for v in DEB_BUILD_PROFILES DEB_BUILD_OPTIONS CUDA_HOME NCCL_ROOT CUDACXX; do
    if [ -n "${!v:-}" ]; then pass+=("$v=${!v}"); fi
  done
  clean "${pass[@]}" dpkg-buildpackage -b -us -uc -J"$(nproc)"
  ls -l "$out"/*.deb
}

s_lintian() {
  # Errors fail the step; warnings are explained in packaging/debian/README.lintian.
  lintian --fail-on error -I --tag-display-limit 0 "$out"/libreshard_*.changes \
    2>&1 | { grep -v '^running with root privileges' || true; } | tee "$work/lintian.txt"
}

s_install() {
  local d installed=()
  for d in "${debs[@]}"; do echo "$d"; done
  for d in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed"; then
      installed+=("$d")
    fi
  done
  if [ ${#installed[@]} -gt 0 ]; then
    echo "purging an earlier installation: ${installed[*]}"
    $sudo apt-get purge -y "${installed[@]}"
  fi
  local left
  left="$(owned_paths)"
  [ -z "$left" ] || { echo "already there before the install:"; echo "$left"; return 1; }
  $sudo apt-get install -y "${debs[@]}"
  for d in "${packages[@]}"; do
    dpkg-query -W -f='${Package} ${Version} ${Status}\n' "$d"
  done
}

# The file the running program took from a package, and that package.
owner_of() { # owner_of FILE EXPECTED-PACKAGE
  local f owner
  f="$(readlink -f "$1")"
  owner="$(dpkg -S "$f" 2>/dev/null | sed -n 's/^\([^:,]*\):.*/\1/p' | head -n 1)" || true
  echo "$1 -> $f: from ${owner:-no package}"
  [ "$owner" = "$2" ]
}

s_c_pkgconfig() {
  mkdir -p "$use/c" && cd "$use/c"
  cp "$repo/examples/quickstart.c" .
  clean sh -c 'env | sort' | tee env.txt
  if grep -F "$repo" env.txt; then echo "the source tree is in the environment"; return 1; fi
  clean pkg-config --modversion reshard | grep -qx "$version"
  echo "pkg-config: $(clean pkg-config --cflags --libs reshard)"
  clean sh -c 'cc -std=c11 -Wall -Werror quickstart.c $(pkg-config --cflags --libs reshard) -o quickstart'
  clean ./quickstart
  local lib
  lib="$(clean ldd ./quickstart | awk '$1 == "libreshard.so.0" { print $3 }')"
  echo "libreshard.so.0 => $lib"
  owner_of "$lib" libreshard0
}

s_cmake() {
  mkdir -p "$use/cmake" && cd "$use/cmake"
  cp "$repo/examples/quickstart.c" .
  cat > CMakeLists.txt <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(reshard_consumer C)
find_package(reshard 0.4 REQUIRED)
message(STATUS "reshard ${reshard_VERSION} from ${reshard_DIR}")
add_executable(quickstart quickstart.c)
target_link_libraries(quickstart PRIVATE reshard::reshard)
add_executable(quickstart_static quickstart.c)
target_link_libraries(quickstart_static PRIVATE reshard::reshard_static)
EOF
  clean cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  grep -q "^reshard_DIR:PATH=$libdir/cmake/reshard$" build/CMakeCache.txt
  clean cmake --build build -j"$(nproc)"
  clean ./build/quickstart
  clean ./build/quickstart_static
  owner_of "$(clean ldd build/quickstart | awk '$1 == "libreshard.so.0" { print $3 }')" libreshard0
  if clean ldd build/quickstart_static | grep libreshard; then return 1; fi
}

s_python() {
  mkdir -p "$use/python" && cd "$use/python"
  cp "$repo/bindings/python/examples/scenario.py" .
  local file
  file="$(clean python3 -c 'import reshard; print(reshard.__file__)')"
  echo "reshard: $file ($(clean python3 -c 'import reshard; print(reshard.__version__)'))"
  owner_of "$file" python3-reshard
  clean python3 scenario.py
}

go_env() {
  clean GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOENV=off GOWORK=off \
    GOFLAGS=-mod=mod GOCACHE="$use/go/cache" GOPATH="$use/go/gopath" \
    CGO_ENABLED=1 "$@"
}

s_go_module() {
  mkdir -p "$use/go/module" && cd "$use/go/module"
  cp "$repo/bindings/go/examples/scenario/main.go" .
  cat > go.mod <<'EOF'
module example.com/reshard-consumer

go 1.19

require libreshard.dev/reshard v0.0.0

replace libreshard.dev/reshard => /usr/share/gocode/src/libreshard.dev/reshard
EOF
  go_env GO111MODULE=on go list -f '{{.Dir}}' libreshard.dev/reshard
  go_env GO111MODULE=on go build -o scenario .
  clean ./scenario
  owner_of "$(clean ldd ./scenario | awk '$1 == "libreshard.so.0" { print $3 }')" libreshard0
}

s_go_gopath() {
  # As Debian builds Go programs: GOPATH mode over /usr/share/gocode.
  mkdir -p "$use/go/gopath-mode" && cd "$use/go/gopath-mode"
  cp "$repo/bindings/go/examples/scenario/main.go" .
  clean GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$use/go/cache" \
    GOFLAGS= go run main.go | tail -n 3
}

s_lua() {
  mkdir -p "$use/lua" && cd "$use/lua"
  cp "$repo/bindings/lua/examples/scenario.lua" .
  local paths
  paths="$(clean lua5.4 -e 'print(package.searchpath("reshard", package.path))
    print(package.searchpath("reshard_swig", package.cpath))')"
  echo "$paths"
  owner_of "$(echo "$paths" | sed -n 1p)" lua-reshard
  owner_of "$(echo "$paths" | sed -n 2p)" lua-reshard
  clean lua5.4 scenario.lua
}

s_cli() {
  mkdir -p "$use/cli" && cd "$use/cli"
  owner_of "$(clean sh -c 'command -v reshard')" reshard-tools
  clean reshard --version | tee version.txt
  grep -q "^reshard $version (libreshard $version)" version.txt
  clean reshard plan --model Llama-3.1-8B --train tp=2,dp=2 --infer tp=4 \
    --cluster dgx-h100 --quiet
  clean reshard plan --model Qwen3-32B --train tp=2,pp=2 --infer tp=4 \
    --cluster /usr/share/reshard/clusters/dgx-h200.json --json --quiet > plan.json
  clean python3 -m json.tool plan.json > /dev/null
  local man
  man="$(clean man -w reshard)"
  echo "man page: $man"
  test -f "$man"
  owner_of "$man" reshard-tools
  clean MANWIDTH=80 MANPAGER=cat man reshard > man.txt 2>&1
  head -n 12 man.txt
}

MPI_ENV=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none)

s_mpi_c() {
  mkdir -p "$use/mpi" && cd "$use/mpi"
  cat > mpi_check.c <<'EOF'
/* Two MPI processes: each adds only its own shards of a 4 x 6 tensor
 * (source: its 2 rows; destination: the other rank's 3 columns), the
 * layouts are allgathered, planned and executed twice, and every element
 * is checked. Prints which MPI module file the process loaded. */
#include <mpi.h>
#include <reshard/reshard_mpi.h>
#include <stdio.h>
#include <string.h>

enum { R = 4, C = 6 };
static rs_context *ctx;
#define CHECK(call)                                                      \
  do {                                                                   \
    rs_status st_ = (call);                                              \
    if (st_ != RS_OK) {                                                  \
      fprintf(stderr, "%s: %s: %s\n", #call, rs_status_name(st_),        \
              ctx ? rs_context_last_error(ctx) : rs_last_error());       \
      MPI_Abort(MPI_COMM_WORLD, 1);                                      \
    }                                                                    \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 2) {
    if (me == 0) fprintf(stderr, "run with -np 2\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  CHECK(rs_context_create_mpi(MPI_COMM_WORLD, &ctx));
  rs_transport_kind kind;
  CHECK(rs_context_transport(ctx, &kind));
  char line[4096], module[4096] = "(not mapped)";
  FILE *maps = fopen("/proc/self/maps", "r");
  while (maps && fgets(line, sizeof line, maps)) {
    char *p = strstr(line, " /");
    if (p && strstr(line, "libreshard-mpi.so")) {
      snprintf(module, sizeof module, "%s", p + 1);
      module[strcspn(module, "\n")] = 0;
      break;
    }
  }
  if (maps) fclose(maps);

  const int64_t shape[2] = {R, C};
  const int64_t soff[2] = {me * (R / 2), 0}, sext[2] = {R / 2, C};
  const int64_t doff[2] = {0, (1 - me) * (C / 2)}, dext[2] = {R, C / 2};
  rs_layout *src, *dst;
  CHECK(rs_layout_create(ctx, &src));
  CHECK(rs_layout_create(ctx, &dst));
  CHECK(rs_layout_add_tensor(src, "w", RS_DTYPE_F32, 2, shape));
  CHECK(rs_layout_add_tensor(dst, "w", RS_DTYPE_F32, 2, shape));
  CHECK(rs_layout_add_shard(src, "w", me, soff, sext, 0, 0, NULL));
  CHECK(rs_layout_add_shard(dst, "w", me, doff, dext, 0, 0, NULL));
  CHECK(rs_layout_allgather(src));
  CHECK(rs_layout_allgather(dst));
  rs_plan *plan;
  CHECK(rs_plan_create(src, dst, &plan));
  float s[R / 2 * C], d[R * (C / 2)];
  CHECK(rs_plan_bind(plan, RS_SIDE_SRC, me, 0, s, sizeof s));
  CHECK(rs_plan_bind(plan, RS_SIDE_DST, me, 0, d, sizeof d));
  int bad = 0, checked = 0;
  for (int step = 0; step < 2; step++) {
    for (int i = 0; i < R / 2; i++)
      for (int j = 0; j < C; j++)
        s[i * C + j] = (float)(1000 * step + 100 * (soff[0] + i) + j);
    memset(d, 0, sizeof d);
    CHECK(rs_plan_execute(plan));
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C / 2; j++, checked++)
        bad += d[i * (C / 2) + j] != (float)(1000 * step + 100 * i + doff[1] + j);
  }
  int bad_all = 0;
  MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: transport %s, module %s, %d elements checked, %d wrong\n", me,
         kind == RS_TRANSPORT_MPI ? "MPI" : "not MPI", module, checked, bad);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  MPI_Finalize();
  return bad_all != 0 || kind != RS_TRANSPORT_MPI;
}
EOF
  clean sh -c 'mpicc -std=c11 -Wall -Werror mpi_check.c $(pkg-config --cflags --libs reshard) -o mpi_check'
  clean "${MPI_ENV[@]}" mpirun --allow-run-as-root --oversubscribe -np 2 ./mpi_check | tee out.txt
  [ "$(grep -c ', 0 wrong$' out.txt)" -eq 2 ]
  owner_of "$(sed -n 's/.*, module \(.*\), [0-9]* elements.*/\1/p' out.txt | head -n 1)" libreshard-mpi0
}

s_mpi_python() {
  mkdir -p "$use/mpi" && cd "$use/mpi"
  cp "$repo/bindings/python/tests/mpi/allgather_np4.py" .
  clean "${MPI_ENV[@]}" mpirun --allow-run-as-root --oversubscribe -np 4 \
    python3 allgather_np4.py
}

s_purge() {
  local pkgs=() p
  for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      pkgs+=("$p")
    fi
  done
  local files=""
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "purging: ${pkgs[*]}"
    files="$(dpkg -L "${pkgs[@]}" | sort -u)"
    $sudo apt-get purge -y "${pkgs[@]}"
  else
    echo "none of the packages is installed"
  fi
  local bad=0
  for p in "${packages[@]}"; do
    if dpkg -L "$p" > /dev/null 2>&1; then
      echo "dpkg still knows $p:"; dpkg -L "$p" | head; bad=1
    fi
  done
  local f
  while IFS= read -r f; do
    if [ -n "$f" ] && [ ! -d "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; }; then
      echo "left behind: $f"; bad=1
    fi
  done <<< "$files"
  local left
  left="$(owned_paths)"
  [ -z "$left" ] || { echo "left behind:"; echo "$left"; bad=1; }
  if [ $bad -eq 0 ]; then echo "nothing left: $(echo "$files" | wc -l) paths checked"; fi
  return $bad
}

# ---- the run ------------------------------------------------------------------
# (step is never called in a condition: there, bash would ignore set -e in
# the step's own commands.)
echo "libreshard $version packages; work folder $work"
step deps s_deps
step build s_build
built=$?
if [ $built -eq 0 ]; then
  for d in "$out"/*.deb; do
    p="$(dpkg-deb -f "$d" Package)"
    case "$p" in *-dbgsym) continue ;; esac
    packages+=("$p") debs+=("$d")
  done
  echo "     built: ${packages[*]}"
  step lintian s_lintian
  step install s_install
  installed=$?
  if [ $installed -eq 0 ]; then
    step c-pkgconfig s_c_pkgconfig
    step cmake-package s_cmake
    step python s_python
    step go-module s_go_module
    step go-gopath s_go_gopath
    step lua s_lua
    step cli-and-man s_cli
    step mpi-c-np2 s_mpi_c
    if clean python3 -c 'import mpi4py' 2> /dev/null; then
      step mpi-python-np4 s_mpi_python
    else
      skip mpi-python-np4 "no mpi4py"
    fi
  fi
  step purge s_purge
fi

total=$(awk -v a="$total_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
echo
if [ -f "$work/lintian.txt" ]; then
  echo "==== lintian: $(grep -c '^E: ' "$work/lintian.txt") errors, $(grep -c '^W: ' "$work/lintian.txt") warnings (packaging/debian/README.lintian says why)"
  sed 's/^/    /' "$work/lintian.txt"
fi
echo "==== summary: libreshard $version, packages: ${packages[*]:-none}"
for i in "${!names[@]}"; do
  printf '  %-16s %-8s %6s s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
echo "  total: ${total} s; $failed step(s) failed"
if [ $failed -eq 0 ] && [ "${RESHARD_PKG_KEEP:-0}" != 1 ] && [ -z "${RESHARD_PKG_WORK:-}" ]; then
  rm -rf "$work"
else
  echo "  logs and packages: $work"
fi
[ $failed -eq 0 ]
