#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The layering check (ctest abi.layering): core/ never calls capi/
# (docs: DESIGN.md, "Layers"). No object of the core may need an rs_*
# function that the core does not define itself (those are the public
# functions of capi/src; the core has rsi_* twins of what it needs, such as
# rsi_dtype_name, rsi_status_name, rsi_version_string), and no transport
# module may need any rs_* function at all. The core may include
# reshard/reshard.h for the ABI's enums and types: only calls are checked,
# on the compiled objects, so a call through a macro counts too.
# Usage: check_layering.sh CORE_OBJECT_LIST [MODULE...]
#   CORE_OBJECT_LIST: a file naming the core's object files, one a line.
set -eu
LC_ALL=C
export LC_ALL
list="$1"
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/calls"
: > "$tmp/defined"
nobj=0
while IFS= read -r obj; do
  [ -n "$obj" ] || continue
  nobj=$((nobj + 1))
  nm --defined-only "$obj" | awk 'NF == 3 && $3 ~ /^rs_/ { print $3 }' \
    >> "$tmp/defined"
  nm -u "$obj" | awk -v o="${obj##*/}" '$NF ~ /^rs_/ { print $NF, o }' \
    >> "$tmp/calls"
done < "$list"
if [ "$nobj" -eq 0 ]; then
  echo "abi.layering: no core objects listed in $list"
  exit 1
fi
sort -u -o "$tmp/defined" "$tmp/defined"
sort -o "$tmp/calls" "$tmp/calls"
bad=$(join -v1 "$tmp/calls" "$tmp/defined" |
  awk '{ print "    " $2 " calls " $1 }')
for m in "$@"; do
  more=$(nm -D --undefined-only "$m" |
    awk -v m="${m##*/}" '$NF ~ /^rs_/ { sub(/@.*/, "", $NF)
                                        print "    " m " calls " $NF }')
  [ -z "$more" ] || bad="${bad:+$bad
}$more"
done
if [ -n "$bad" ]; then
  echo "abi.layering: core/ calls functions of capi/ (use or add an rsi_*"
  echo "function in core/ instead):"
  printf '%s\n' "$bad"
  exit 1
fi
echo "$nobj core objects and $# transport module(s) call no rs_* function" \
  "of capi/"
