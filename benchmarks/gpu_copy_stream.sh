#!/usr/bin/env bash
# One device call (~5 min): the concatenated levels' copies on a side CUDA stream (ops/copy_stream.py,
# MSCRED_COPY_STREAM=1): x_t into [x_t, h_{t-1}] for steps 1..T-1 beside step 0's kernels, and each step's dx_t out
# of the transposed convolution's [dx_t, dh_{t-1}] beside the chain of the next steps.
# First its GPU tests (gradients equal to one stream's, a copy waits for the stream's work, the graphed step's
# losses) with the neighbouring side-stream tests -> $OUT/copy_stream/gpu_tests.txt; then the graphed bf16 training
# step in alternation, three rounds (gpu_train_variants.sh, parts cut at 45 s): off (MSCRED_COPY_STREAM=0), on.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir copy_stream)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_copy_stream.py tests/test_wgrad_stream.py \
  tests/test_ops_triton_convlstm.py -k "copy or side or concat or Concat"
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh copy_stream \
  "off_1:g-fused-bf16:MSCRED_COPY_STREAM=0" "on_1:g-fused-bf16:MSCRED_COPY_STREAM=1" \
  "off_2:g-fused-bf16:MSCRED_COPY_STREAM=0" "on_2:g-fused-bf16:MSCRED_COPY_STREAM=1" \
  "off_3:g-fused-bf16:MSCRED_COPY_STREAM=0" "on_3:g-fused-bf16:MSCRED_COPY_STREAM=1"
grep -h "train fused + CUDA graph + bf16 " "$D/log.txt" | head -8
