#!/usr/bin/env bash
# Set up, build, and run the main job on the embedded default: move two
# Qwen3-32B decoder layers (about 2 GB, bf16) from a TP2xDP2 trainer layout
# to a TP4 inference layout, every rank in this process, verify every byte,
# and print the figures beside a plain memcpy of the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=build/release
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRESHARD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
"$build/examples/quickstart"
"$build/bench/bench_exec_local"
