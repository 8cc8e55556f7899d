#!/usr/bin/env bash
# One device call (~8 min): the fused attention's scratch maps with L2 evict-last hints (-DMSCRED_RESIDENT_SCRATCH_HINT=1)
# against the default build, then the GPU test suite of the code as committed:
#   1. the whole model, in alternation: default, hint, default (bench_train.py's graphed bf16 part)
#                                                                      -> default_1.md, hint_1.md, default_2.md
#   2. the fused attention's GPU tests with the hint build                                     -> gpu_tests_hint.txt
#   3. the GPU suite but the unchanged im2col build checks (gpu_suite_parallel.sh)            -> gpu_suite/*.txt
# Writes $OUT/scratch_hint.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir scratch_hint)
HINT="-DMSCRED_RESIDENT_SCRATCH_HINT=1"
build_resident "$D" "" "$HINT"
OUT="$D" bash benchmarks/gpu_train_variants.sh . "default_1:g-fused-bf16" \
  "hint_1:g-fused-bf16:MSCRED_RESIDENT_LSTM_FLAGS=$HINT" "default_2:g-fused-bf16"
MSCRED_RESIDENT_LSTM_FLAGS="$HINT" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_hint.txt" 90 tests/test_lstm_attention.py
GPU_SUITE_PACK=0 OUT="$D" timeout $((570 - SECONDS)) bash benchmarks/gpu_suite_parallel.sh convlstm triton_ops train_im2col rest  # within the call's 600 s
(cd "$OUT" && tar czf scratch_hint.tgz scratch_hint && rm -rf scratch_hint)
