#!/usr/bin/env bash
# One device call (~7 min): level 1 (32 channels) through the per-window kernel at every batch from MIN_BATCH, the
# scoring batch of 3,591 windows included, with its tile (64, 8, 1, 1) (convlstm_window.ANY_BATCH_CH, BLOCKS), against
# the per-step path there, each twice in alternation so that drift between processes shows:
#   1. the GPU tests of the per-window kernel and of the model's window path -> gpu_tests.txt
#   2. bench_train.py's graphed bf16 part (training step, inference, end to end): per_step_{1,2}
#      (MSCRED_WINDOW_LSTM=0) and level1_window_{1,2} (the defaults) -> {per_step,level1_window}_{1,2}.md, log.txt
# The folder comes back as $OUT/window_level1.tgz (the device returns at most 8 files).
# Usage (repository root, CUDA machine): bash benchmarks/gpu_window_level1.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir window_level1)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py tests/test_forward_windows.py \
  -k "window or full_size_bf16 or graphed_window"
bash benchmarks/gpu_train_variants.sh window_level1 "per_step_1:g-fused-bf16:MSCRED_WINDOW_LSTM=0" \
  "level1_window_1:g-fused-bf16" "per_step_2:g-fused-bf16:MSCRED_WINDOW_LSTM=0" "level1_window_2:g-fused-bf16"
(cd "$OUT" && tar czf window_level1.tgz window_level1 && rm -rf window_level1)
