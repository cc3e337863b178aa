#!/bin/sh
# Compile and run the C block of the README exactly as it stands.
# Usage: readme_example.sh README.md INCLUDE_DIR STATIC_LIB WORK_DIR
set -eu
awk '/^```c$/ {f = 1; next} /^```$/ {f = 0} f' "$1" > "$4/readme_example.c"
cc -std=c11 -Wall -Wextra -pedantic -Werror -I"$2" "$4/readme_example.c" "$3" \
  -lpthread -o "$4/readme_example"
"$4/readme_example"
