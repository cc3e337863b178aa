#!/bin/sh
# The shared library exports exactly the functions the public headers
# declare with RS_API: nothing internal leaks, nothing declared is missing.
set -eu
lib="$1"
headers="$2"
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
declared=$(cat "$headers"/*.h | grep -v "^ *#" | tr '\n' ' ' | grep -o 'RS_API[^(]*(' |
  sed 's/($//; s/.*[ *]//' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from RS_API declarations:"
  printf '%s\n' "$exported" > /tmp/rs_exported.$$
  printf '%s\n' "$declared" | diff /tmp/rs_exported.$$ - || true
  rm -f /tmp/rs_exported.$$
  exit 1
fi
echo "$(printf '%s\n' "$exported" | wc -l) rs_ symbols exported, all declared"
