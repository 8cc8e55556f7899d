#!/usr/bin/env bash
# One device call (~5 min): levels 3-4's recurrent data gradient as one GEMM into the four tap shares, summed by the
# backward cell kernel (MSCRED_LSTM_DGRAD_GEMM=1, convlstm_gemm.dgrad_by_gemm; per call 1.49-1.56x cuDNN's,
# results/im2col_levels/) against the default, in alternation twice on bench_train.py's graphed bf16 part; then its
# GPU tests (the new ones and the fused ConvLSTM's full-size rows, with the setting on).
# Usage: bash benchmarks/gpu_dgrad_gemm.sh. Writes $OUT/dgrad_gemm/.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir dgrad_gemm)
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh dgrad_gemm \
  "default_1:g-fused-bf16" "gemm_1:g-fused-bf16:MSCRED_LSTM_DGRAD_GEMM=1" \
  "default_2:g-fused-bf16" "gemm_2:g-fused-bf16:MSCRED_LSTM_DGRAD_GEMM=1"
echo "variants done at ${SECONDS}s"
MSCRED_LSTM_DGRAD_GEMM=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 110 tests/test_ops_triton_convlstm.py \
  -k "recurrent_gradient_by_gemm or recurrent_dgrad_taps or full_size_on_gpu"
