#!/usr/bin/env bash
# One device call (~3 min): bench_train.py's graphed bf16 part with the bias + SELU forward tile before the sweep
# (MSCRED_BIAS_ACT_FWD_TILE=2048/4) and the new default (1024 x 8), beside one eager baseline run whose profile of
# bf16 scoring is of the final defaults. Writes $OUT/bias_act_tile/{before,after}.md and log.txt.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_bias_act_tile.sh
set -uo pipefail
. benchmarks/device_env.sh
mkdir -p "$OUT/bias_act_tile"
bash benchmarks/machine_info.sh > "$OUT/bias_act_tile/machine.txt" 2>&1
PART_TIMEOUT_S=${PART_TIMEOUT_S:-45} bash benchmarks/gpu_train_variants.sh bias_act_tile \
  "before:g-fused-bf16:MSCRED_BIAS_ACT_FWD_TILE=2048/4" "after:g-fused-bf16"
