#!/usr/bin/env bash
# One device call (~2 min): bench_small_tiles.py, the bias + SELU and small-channel convolution forward tiles on the
# model's own calls (scoring and a training forward). Writes $OUT/small_tiles/{small_tiles.md,.json,bench_log.txt}.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_small_tiles.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/small_tiles"; mkdir -p "$D"
{ bash benchmarks/machine_info.sh; timeout 200 python3 benchmarks/bench_small_tiles.py --out "$D"; echo "exit $?"; } \
  > "$D/bench_log.txt" 2>&1
tail -45 "$D/bench_log.txt"
