#!/usr/bin/env bash
# One device call (~8-9 min): what the first whole-suite GPU run (results/gpu_full_suite/) left to check.
#   1. probe_conv_triton.py again, now with its GEMM-floor rows (cuBLAS TF32 on a prepared im2col matrix per layer),
#      first and alone, since it times kernels
#   2. the files the 530 s cap cut off, as four pytest processes side by side (in one process they took more than
#      400 s: Triton compiles on the host's cores, one at a time): the fused ConvLSTM's, the small-channel conv's,
#      the fused model's training with the Trainer's CUDA-graph tests, and mscred sass's GPU launch
# (The fused attention's tests after the 1/T fix ran in the call before: results/gpu_full_suite/attention_after_fix.txt.)
# Writes $OUT/conv_triton_floor/ (+ .log) and $OUT/gpu_full_suite/rest_{convlstm,small_conv,train,sass}.txt.
# Usage (repository root, CUDA machine): bash benchmarks/results/gpu_full_suite/gpu_suite_rest.sh (kept as it ran;
# benchmarks/gpu_suite_parallel.sh runs the whole suite the same way)
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/gpu_full_suite"; mkdir -p "$D"
cache_bytecode
timeout 150 python3 benchmarks/probe_conv_triton.py --out "$OUT/conv_triton_floor" > "$OUT/conv_triton_floor.log" 2>&1
echo "probe_conv_triton exit code $?"
grep "^|" "$OUT/conv_triton_floor.log"
bash benchmarks/gpu_pytest.sh "$D/rest_convlstm.txt" 390 tests/test_ops_triton_convlstm.py &
bash benchmarks/gpu_pytest.sh "$D/rest_small_conv.txt" 390 tests/test_ops_triton_small_conv.py &
bash benchmarks/gpu_pytest.sh "$D/rest_train.txt" 390 tests/test_ops_triton_train.py tests/test_train.py &
bash benchmarks/gpu_pytest.sh "$D/rest_sass.txt" 390 tests/test_sass_cli.py &
wait
grep -h -E "passed|failed|error|exit code" "$D"/rest_*.txt
