#!/usr/bin/env bash
# One device call (~5 min): bias_act's kernels with the map's sizes as constants (the default since 2026-12-02,
# results/bias_act_fwd/) against the runtime-size kernels (MSCRED_BIAS_ACT_CONST_SIZES=0), in alternation, twice, on
# bench_train.py's graphed bf16 part: the training step at batch 128, scoring with shared segments, end to end.
# Usage: bash benchmarks/gpu_bias_act_const.sh. Writes $OUT/bias_act_const/{const,runtime}_{1,2}.md and log.txt.
set -uo pipefail
. benchmarks/device_env.sh
bash benchmarks/machine_info.sh > "$OUT/machine.txt" 2>&1
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh bias_act_const \
  "runtime_1:g-fused-bf16:MSCRED_BIAS_ACT_CONST_SIZES=0" "const_1:g-fused-bf16" \
  "runtime_2:g-fused-bf16:MSCRED_BIAS_ACT_CONST_SIZES=0" "const_2:g-fused-bf16"
mv "$OUT/machine.txt" "$OUT/bias_act_const/"
