#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The constants of reshard.i must be the headers': every "%constant int
# NAME = V;" is compared with the value the C compiler gives NAME, and
# every enumerator of the public headers (RS_... = V inside an enum) must
# be among them, so that a new status, dtype, figure or rule reaches every
# binding. (#define'd numbers other than RS_VERSION_* are checked where
# reshard.i lists them; the version reaches the bindings at run time.)
# Usage: check_constants.sh reshard.i INCLUDE_DIR   (ctest swig.constants)
set -eu
iface="$1"
inc="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo '#include <stdio.h>'
  echo '#include <reshard/reshard.h>'
  echo '#include <reshard/reshard_nccl.h>'
  echo '#include <reshard/recipes.h>'
  echo 'int main(void) { int bad = 0;'
  sed -n 's/^%constant int \([A-Z0-9_]*\) = \(-\{0,1\}[0-9]*\);$/  if ((long long)(\1) != \2LL) { printf("reshard.i: \1 is %lld in C, \2 here\\n", (long long)(\1)); bad = 1; }/p' "$iface"
  echo '  return bad; }'
} > "$tmp/check.c"
n=$(grep -c '^%constant int' "$iface")
m=$(grep -c 'if ((long long)' "$tmp/check.c")
[ "$n" -eq "$m" ] || { echo "reshard.i: $n constants, $m understood"; exit 1; }
cc -I"$inc" -o "$tmp/check" "$tmp/check.c"
"$tmp/check"
# Every enumerator of the public headers is a constant of reshard.i.
sed -n 's/^%constant int \([A-Z0-9_]*\) = .*/\1/p' "$iface" | sort -u \
  > "$tmp/have"
cat "$inc"/reshard/*.h | sed 's@/\*.*\*/@@g' |
  sed -n 's/^[[:space:]]*\(RS_[A-Z0-9_]*\)[[:space:]]*=[[:space:]]*-\{0,1\}[0-9].*/\1/p' |
  sort -u > "$tmp/enums"
[ -s "$tmp/enums" ] || { echo "no enumerator found in $inc/reshard/*.h"; exit 1; }
missing=$(comm -23 "$tmp/enums" "$tmp/have")
if [ -n "$missing" ]; then
  echo "reshard.i lacks these enumerators of the public headers:"
  echo "$missing" | sed 's/^/  /'
  exit 1
fi
echo "reshard.i: $n constants agree with the headers;" \
  "all $(wc -l < "$tmp/enums") enumerators are among them"
