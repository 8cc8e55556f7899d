#!/usr/bin/env bash
# One device call (~8 min): the half-precision inference cell state (MSCRED_LSTM_HALF_CELL) and the sub-pixel
# deconv2 (MSCRED_SUBPIXEL_DECONV), each alone and both, against neither, on bench_train.py's graphed bf16 part
# (training step, inference per batch with shared segments, end to end) beside one eager baseline run.
#   1. GPU tests of the ops they touch -> $OUT/scoring_ab/gpu_tests.txt
#   2. gpu_train_variants.sh: $OUT/scoring_ab/{before,half_cell,subpixel,both}.md (+ log.txt); the eager part's
#      profile of bf16 scoring (all windows, one call) is of the defaults (both on)
# The folder comes back as $OUT/scoring_ab.tgz (the device returns at most 8 files).
# Usage (repository root, CUDA machine): bash benchmarks/gpu_scoring_ab.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/scoring_ab"; mkdir -p "$D"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 170 tests/test_subpixel.py tests/test_ops_triton_convlstm.py \
  tests/test_ops_triton_bias_act.py tests/test_forward_windows.py
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
bash benchmarks/gpu_train_variants.sh scoring_ab \
  "before:g-fused-bf16:MSCRED_LSTM_HALF_CELL=0,MSCRED_SUBPIXEL_DECONV=0" \
  "half_cell:g-fused-bf16:MSCRED_SUBPIXEL_DECONV=0" \
  "subpixel:g-fused-bf16:MSCRED_LSTM_HALF_CELL=0" \
  "both:g-fused-bf16"
(cd "$OUT" && tar czf scoring_ab.tgz scoring_ab && rm -rf scoring_ab)
