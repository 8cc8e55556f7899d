#!/usr/bin/env bash
# One device call (~7 min): the training ConvLSTM on [x_t, h_{t-1}] concatenated (ops/triton/convlstm_concat.py) on
# the H200.
#   1. its GPU tests                                                                                    -> gpu_tests.txt
#   2. the graphed bf16 step in alternation: off (MSCRED_LSTM_CONCAT=0), on (the default: level 1), twice -> model/
#   3. profile_train_step.py with the default: where the step's time goes now                        -> profile/
# Usage: bash benchmarks/gpu_concat_step.sh. Writes $OUT/concat_step.tgz (the tool brings back few files).
# First run (results/concat_step_first/, tree of e50b9d5): no gain -- the backward's transposed convolutions went through
# PyTorch's generated out= variant (a new tensor and a copy) and the copies used PyTorch's strided kernel.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir concat_step)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py -k concat
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "off_1:g-fused-bf16:MSCRED_LSTM_CONCAT=0" \
  "on_1:g-fused-bf16" "off_2:g-fused-bf16:MSCRED_LSTM_CONCAT=0" "on_2:g-fused-bf16"
bench_to_log "$D/profile" 110 benchmarks/profile_train_step.py
grep -E "^## |us  \[" "$D/profile/train_step_profile.txt" | head -30
(cd "$OUT" && tar czf concat_step.tgz concat_step && rm -rf concat_step)
