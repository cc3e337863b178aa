#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The layering check (ctest abi.layering), docs/ARCHITECTURE.md:
#  1. core/ never calls capi/: no object of the core may need an rs_*
#     function that the core does not define itself (those are the public
#     functions of capi/src; the core has rsi_* twins of what it needs), and
#     no transport module may need any rs_* function at all. The core may
#     include reshard/reshard.h for the ABI's enums and types.
#  2. The folders of core/ call one way only (the arrows below), checked on
#     the includes of the sources and on the calls of the compiled objects
#     (so a call through a macro counts too): an object of folder F may
#     need an rsi_* function only from F or from a folder F may call.
#  3. No source file under core/ is longer than MAX_LINES lines.
# Usage: check_layering.sh CORE_SOURCE_DIR CORE_OBJECT_LIST [MODULE...]
#   CORE_OBJECT_LIST: a file naming the core's object files, one a line,
#   each under a folder named as its source's (.../plan/plan.c.o).
set -eu
LC_ALL=C
export LC_ALL
src="$1"
list="$2"
shift 2
MAX_LINES=1200

# What each folder may call besides itself. transport/ holds the interface
# and the modules; the NCCL module implements a copy engine (copy/).
may_call() {
  case "$1" in
    base) echo "" ;;
    layout) echo "base" ;;
    plan) echo "layout base" ;;
    recipes) echo "layout base" ;;
    copy) echo "base" ;;
    transport) echo "copy base" ;;
    session) echo "plan layout copy transport base" ;;
    exec) echo "session plan layout copy transport base" ;;
    *) echo "?" ;;
  esac
}
folders="base layout plan recipes copy transport session exec"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad="$tmp/bad"
: > "$bad"

# ---- 1. no call into capi/ ---------------------------------------------
: > "$tmp/calls"
: > "$tmp/defined"
: > "$tmp/rsi_defined"
: > "$tmp/rsi_calls"
nobj=0
while IFS= read -r obj; do
  [ -n "$obj" ] || continue
  nobj=$((nobj + 1))
  folder=$(printf '%s\n' "$obj" | sed -n 's|.*/reshard_core\.dir/\([a-z_]*\)/.*|\1|p')
  nm --defined-only "$obj" | awk 'NF == 3 && $3 ~ /^rs_/ { print $3 }' \
    >> "$tmp/defined"
  nm --defined-only "$obj" |
    awk -v f="$folder" 'NF == 3 && $2 ~ /[TDBR]/ && $3 ~ /^rsi_/ { print $3, f }' \
    >> "$tmp/rsi_defined"
  nm -u "$obj" | awk -v o="${obj##*/}" '$NF ~ /^rs_/ { print $NF, o }' \
    >> "$tmp/calls"
  nm -u "$obj" | awk -v f="$folder" -v o="$folder/${obj##*/}" \
    '$NF ~ /^rsi_/ { print $NF, f, o }' >> "$tmp/rsi_calls"
done < "$list"
if [ "$nobj" -eq 0 ]; then
  echo "abi.layering: no core objects listed in $list"
  exit 1
fi
sort -u -o "$tmp/defined" "$tmp/defined"
sort -o "$tmp/calls" "$tmp/calls"
join -v1 "$tmp/calls" "$tmp/defined" |
  awk '{ print "core/ calls capi/: " $2 " calls " $1 \
         " (use or add an rsi_* function in core/ instead)" }' >> "$bad"
for m in "$@"; do
  nm -D --undefined-only "$m" |
    awk -v m="${m##*/}" '$NF ~ /^rs_/ { sub(/@.*/, "", $NF)
      print "core/ calls capi/: " m " calls " $NF " (a module calls no rs_* function)" }' \
    >> "$bad"
done

# ---- 2. the arrows between folders ---------------------------------------
rules="$tmp/rules"
: > "$rules"
for f in $folders; do
  echo "$f $f" >> "$rules"
  for g in $(may_call "$f"); do echo "$f $g" >> "$rules"; done
done
sort -u -o "$rules" "$rules"
# calls: the folder of the caller's object and of the function's definition
sort -u -o "$tmp/rsi_defined" "$tmp/rsi_defined"
sort -o "$tmp/rsi_calls" "$tmp/rsi_calls"
join "$tmp/rsi_calls" "$tmp/rsi_defined" |
  awk '{ print $2, $4, $3, $1 }' | sort > "$tmp/arrows"
while read -r from to obj fn; do
  if ! grep -qx "$from $to" "$rules"; then
    echo "arrow $from/ -> $to/: $obj calls $fn ($from/ may call:" \
      "$(may_call "$from" | sed 's/^$/nothing else/'))" >> "$bad"
  fi
done < "$tmp/arrows"
# includes: every "folder/file.h" a source under a folder names
for f in $folders; do
  [ -d "$src/$f" ] || continue
  find "$src/$f" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
    sort | while IFS= read -r file; do
      sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/[^"]*".*|\1|p' "$file" |
        sort -u | while IFS= read -r to; do
          case " $folders " in *" $to "*) ;; *) continue ;; esac
          if ! grep -qx "$f $to" "$rules"; then
            echo "arrow $f/ -> $to/: ${file#"$src"/} includes $to/ ($f/ may" \
              "call: $(may_call "$f" | sed 's/^$/nothing else/'))" >> "$bad"
          fi
        done
    done
done
# every source file of the core lives in a folder of the table
find "$src" -mindepth 1 -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) |
  sort | while IFS= read -r file; do
    echo "a source outside the folders: ${file#"$src"/} (put it in one of:" \
      "$folders)" >> "$bad"
  done

# ---- 3. small files -------------------------------------------------------
find "$src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
  sort | while IFS= read -r file; do
    n=$(wc -l < "$file")
    if [ "$n" -gt "$MAX_LINES" ]; then
      echo "too long: ${file#"$src"/} has $n lines (at most $MAX_LINES:" \
        "split it by job)" >> "$bad"
    fi
  done

if [ -s "$bad" ]; then
  echo "abi.layering: the core breaks its layering (docs/ARCHITECTURE.md):"
  sed 's/^/    /' "$bad"
  exit 1
fi
narrows=$(awk '$1 != $2' "$tmp/arrows" | wc -l)
echo "$nobj core objects and $# transport module(s) call no rs_* function" \
  "of capi/; $narrows calls between folders, all along the arrows; no file" \
  "over $MAX_LINES lines"
