#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The ABI guard (ctest abi.abidiff): compare libreshard.so.0 as built with
# the committed baseline of the last release (packaging/abi/, made by
# abidw from a build with debug info), restricted to the public headers.
#   any change but an addition (a removed function, an added parameter,
#   a changed type, size or enumerator): FAIL. libabigail calls most of
#   these "to review" (exit bit 4), not incompatible (bit 8): so any
#   report left once additions are filtered out fails
#   additions only: pass, and the report is printed
# A library built without debug info cannot be compared type by type:
# the test is skipped (exit 77).
# Usage: check_abi.sh BASELINE.abi LIBRARY HEADER_DIR
set -u
baseline="$1"
lib="$2"
headers="$3"
if ! readelf -S "$lib" 2>/dev/null | grep -q '\.debug_info'; then
  echo "abi.abidiff: $lib has no debug info (build with -g): skipped"
  exit 77
fi
report=$(abidiff --no-added-syms --headers-dir2 "$headers" "$baseline" "$lib" 2>&1)
rc=$?
full=$(abidiff --headers-dir2 "$headers" "$baseline" "$lib" 2>&1)
if [ $((rc & 3)) -ne 0 ]; then
  echo "abi.abidiff: abidiff could not compare (exit $rc):"
  echo "$report"
  exit 1
fi
if [ $((rc & 12)) -ne 0 ]; then
  echo "abi.abidiff: INCOMPATIBLE with the baseline $baseline:"
  echo "$report"
  echo "(an incompatible change needs a new SONAME: docs/ABI.md)"
  exit 1
fi
echo "abi.abidiff: compatible with the baseline $(basename "$baseline")."
echo "$full" | grep -q 'Added' && echo "$full"
exit 0
