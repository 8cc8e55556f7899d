#!/usr/bin/env bash
# One device call (~5 min): levels 3-4's recurrent data gradient as one GEMM into the four tap shares, summed by the
# backward cell kernel (MSCRED_LSTM_DGRAD_GEMM=1, convlstm_gemm.dgrad_by_gemm; per call 1.49-1.56x cuDNN's,
# results/im2col_levels/) against the default, in alternation twice on bench_train.py's graphed bf16 part; then its
# GPU tests (the new ones and the fused ConvLSTM's full-size rows, with the setting on). Ran 2026-12-02
# (results/dgrad_gemm/), when the GEMM path was opt-in; it is the default since, so its rows now compare the default
# with itself (MSCRED_LSTM_DGRAD_GEMM=0 is the path it was measured against).
# Usage: bash benchmarks/gpu_dgrad_gemm.sh. Writes $OUT/dgrad_gemm/.
exec bash benchmarks/gpu_setting_ab.sh dgrad_gemm gemm MSCRED_LSTM_DGRAD_GEMM=1 110 tests/test_ops_triton_convlstm.py \
  -k "recurrent_gradient_by_gemm or recurrent_dgrad_taps or full_size_on_gpu"
