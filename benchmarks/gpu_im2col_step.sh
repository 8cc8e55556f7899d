#!/usr/bin/env bash
# One device call (~6 min), prepared 2026-12-02 and not run yet (that session's device time was spent): levels 3-4's
# h kept as its recurrent convolution's im2col, written by the forward cell kernel, so that the recurrent
# convolution and its weight gradient are cuBLAS GEMMs too (MSCRED_LSTM_IM2COL=1, convlstm_gemm.im2col_recurrence; per
# call 1.26-1.29x and 1.06-1.41x cuDNN's, results/im2col_levels/) against the default (the data gradient already
# by GEMM), in alternation twice on bench_train.py's graphed bf16 part; then its GPU tests (the float64 rows and the
# fused ConvLSTM's full-size rows with the setting on, and the whole model's 50-step and graph tests with it on).
# Usage: bash benchmarks/gpu_im2col_step.sh. Writes $OUT/im2col_step/.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir im2col_step)
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh im2col_step \
  "default_1:g-fused-bf16" "im2col_1:g-fused-bf16:MSCRED_LSTM_IM2COL=1" \
  "default_2:g-fused-bf16" "im2col_2:g-fused-bf16:MSCRED_LSTM_IM2COL=1"
echo "variants done at ${SECONDS}s"
MSCRED_LSTM_IM2COL=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py \
  -k "recurrent_gradient_by_gemm or full_size_on_gpu" &
MSCRED_LSTM_IM2COL=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests_model.txt" 150 tests/test_ops_triton_train.py &
wait
