#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set up, build, and run the main job on the embedded default: 8 MPI
# processes on this machine. Trainer ranks 0-3 (TP2 x DP2) hold two Qwen3-32B
# decoder layers (1.95 GB of bf16); each describes only its own shards, and
# libreshard moves them into inference ranks 4-7 (TP2 x DP2, vLLM's fused
# qkv_proj and gate_up_proj). The same run times gather-and-broadcast, the
# way RL frameworks sync weights today, verifies every destination byte after
# each, and prints the table. Extra arguments: [layers] [repetitions].
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=build/release
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRESHARD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
mpirun_flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)
mpirun "${mpirun_flags[@]}" -np 8 "$build/bench/bench_mpi_refit" "$@"
