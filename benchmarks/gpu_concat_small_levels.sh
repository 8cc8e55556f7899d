#!/usr/bin/env bash
# One device call (~6 min): levels 3-4 on the concatenated path too (convlstm_concat: one convolution of
# [x_t, h_{t-1}] a step and ONE weight-gradient call a level, where the per-step path makes two, each with cuDNN's
# workspace initialisation), against the defaults (levels 1-2 concatenated, levels 3-4 per step with the fused
# recurrent step) -- the graphed bf16 training step in alternation, twice (gpu_train_variants.sh, parts cut at
# 45 s) -> $OUT/concat_small_levels/; then the concatenated path's GPU tests at every level -> gpu_tests.txt.
#   cat3: MSCRED_LSTM_CONCAT_MIN_PIXELS=64 (levels 1-3); cat34: =16 (every level of the default model)
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir concat_small_levels)
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh concat_small_levels \
  "default_1:g-fused-bf16" "cat3_1:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=64" \
  "cat34_1:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=16" \
  "default_2:g-fused-bf16" "cat3_2:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=64" \
  "cat34_2:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=16"
grep -h "train fused + CUDA graph + bf16 " "$D/log.txt" | head -8
MSCRED_LSTM_CONCAT_MIN_PIXELS=16 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 70 \
  tests/test_ops_triton_convlstm.py -k concatenated_gates_full_size_on_gpu
