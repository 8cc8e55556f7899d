#!/usr/bin/env bash
# One device call (~6 min), prepared 2026-12-02 and not run yet (that session's device time was spent): levels 3-4's
# h kept as its recurrent convolution's im2col, written by the forward cell kernel, so that the recurrent
# convolution and its weight gradient are cuBLAS GEMMs too (MSCRED_LSTM_IM2COL=1, convlstm_gemm.im2col_recurrence;
# per call 1.26-1.29x and 1.06-1.41x cuDNN's, results/im2col_levels/) against the default (the data gradient already
# by GEMM), in alternation twice on bench_train.py's graphed bf16 part; then its GPU tests with the setting on: the
# float64 rows, the fused ConvLSTM's full-size rows and the whole model's (50 steps against the reference).
# Usage: bash benchmarks/gpu_im2col_step.sh. Writes $OUT/im2col_step/.
exec bash benchmarks/gpu_setting_ab.sh im2col_step im2col MSCRED_LSTM_IM2COL=1 170 tests/test_ops_triton_convlstm.py \
  tests/test_ops_triton_train.py -k "recurrent_gradient_by_gemm or full_size_on_gpu or same_curve or fifty_steps"
