#!/bin/sh
# The constants of reshard.i must be the header's: every "%constant int
# NAME = V;" is compared with the value the C compiler gives NAME.
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
  echo 'int main(void) { int bad = 0;'
  sed -n 's/^%constant int \([A-Z0-9_]*\) = \(-\{0,1\}[0-9]*\);$/  if ((long long)(\1) != \2LL) { printf("reshard.i: \1 is %lld in C, \2 here\\n", (long long)(\1)); bad = 1; }/p' "$iface"
  echo '  return bad; }'
} > "$tmp/check.c"
n=$(grep -c '^%constant int' "$iface")
m=$(grep -c 'if ((long long)' "$tmp/check.c")
[ "$n" -eq "$m" ] || { echo "reshard.i: $n constants, $m understood"; exit 1; }
cc -I"$inc" -o "$tmp/check" "$tmp/check.c"
"$tmp/check"
echo "reshard.i: $n constants agree with the headers"
