#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Compile and run the C block under "## A short example" in the README,
# exactly as it stands.
# Usage: readme_example.sh README.md INCLUDE_DIR STATIC_LIB WORK_DIR
set -eu
awk '/^## A short example/ {h = 1} h && /^```c$/ {f = 1; next}
     f && /^```$/ {exit} f' "$1" > "$4/readme_example.c"
cc -std=c11 -Wall -Wextra -pedantic -Werror -I"$2" "$4/readme_example.c" "$3" \
  -lpthread -o "$4/readme_example"
"$4/readme_example"
