#!/usr/bin/env bash
# One device call (~6 min): does timing every cuDNN candidate (MSCRED_CUDNN_BENCHMARK_LIMIT=0, inside the graphed
# steps' autotuning) instead of PyTorch's first 10 find faster convolutions for the training step?
#   1. profile_train_step.py with the limit at 0 (its graphed table; the eager tables keep PyTorch's limit)
#                                                                                      -> train_step_profile.txt
#   2. the whole model's graphed bf16 step, PyTorch's limit and 0 in alternation, twice each   -> model/
#   3. tests/test_train.py on the H200 (the scoped setting)                            -> gpu_tests.txt
# Usage: bash benchmarks/gpu_cudnn_limit.sh. Writes $OUT/cudnn_limit.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir cudnn_limit)
MSCRED_CUDNN_BENCHMARK_LIMIT=0 bench_to_log "$D" 200 benchmarks/profile_train_step.py
grep "^## " "$D/train_step_profile.txt"
OUT="$D" PART_TIMEOUT_S=100 bash benchmarks/gpu_train_variants.sh model default_1:g-fused-bf16 \
  all_1:g-fused-bf16:MSCRED_CUDNN_BENCHMARK_LIMIT=0 default_2:g-fused-bf16 all_2:g-fused-bf16:MSCRED_CUDNN_BENCHMARK_LIMIT=0
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_train.py
(cd "$OUT" && tar czf cudnn_limit.tgz cudnn_limit && rm -rf cudnn_limit)
