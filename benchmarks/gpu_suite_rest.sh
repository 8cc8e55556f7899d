#!/usr/bin/env bash
# One device call (~7-9 min): what the first whole-suite GPU run (results/gpu_full_suite/) left to check, and one probe.
#   1. the fused attention's tests, float64 ones included, after the 1/T fix (ops/triton/attention.py)
#   2. the files the 530 s cap cut off, in one process: the rest of the fused ConvLSTM's, the small-channel conv's,
#      the fused model's training, mscred sass's GPU launch and the Trainer's CUDA-graph tests
#   3. probe_conv_triton.py again, now with its GEMM-floor rows (cuBLAS TF32 on a prepared im2col matrix per layer)
# Writes $OUT/gpu_full_suite/{attention_after_fix.txt, rest.txt} and $OUT/conv_triton_floor/.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_suite_rest.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/gpu_full_suite"; mkdir -p "$D"
cache_bytecode
bash benchmarks/gpu_pytest.sh "$D/attention_after_fix.txt" 120 tests/test_ops_triton_attention.py
bash benchmarks/gpu_pytest.sh "$D/rest.txt" 400 tests/test_ops_triton_convlstm.py tests/test_ops_triton_small_conv.py \
  tests/test_ops_triton_train.py tests/test_sass_cli.py tests/test_train.py
timeout 150 python3 benchmarks/probe_conv_triton.py --out "$OUT/conv_triton_floor" > "$OUT/conv_triton_floor.log" 2>&1
echo "probe_conv_triton exit code $?"
grep -E "GEMM floor|ours|cudnn" "$OUT/conv_triton_floor.log" | grep "^|"
