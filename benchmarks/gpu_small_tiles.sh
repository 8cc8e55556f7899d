#!/usr/bin/env bash
# One device call (~2 min): bench_small_tiles.py, the bias + SELU and small-channel convolution forward tiles on the
# model's own calls (scoring and a training forward). Writes $OUT/small_tiles/{small_tiles.md,.json,bench_log.txt}.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_small_tiles.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/small_tiles"
bench_to_log "$D" 200 benchmarks/bench_small_tiles.py
tail -45 "$D/bench_log.txt"
