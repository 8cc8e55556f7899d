#!/usr/bin/env bash
# One device call (~7 min): the training ConvLSTM on [x_t, h_{t-1}] concatenated (ops/triton/convlstm_concat.py) on
# the H200.
#   1. its GPU tests and the ConvLSTM file's full-size / graph rows                                   -> gpu_tests.txt
#   2. the graphed bf16 step in alternation: off (MSCRED_LSTM_CONCAT=0), level 1 (the default), levels 1-2
#      (MSCRED_LSTM_CONCAT_MIN_PIXELS=225), twice each                                                  -> model/
#   3. profile_train_step.py with the default: where the step's time goes now                        -> profile/
# Usage: bash benchmarks/gpu_concat_step.sh. Writes $OUT/concat_step/.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir concat_step)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 100 tests/test_ops_triton_convlstm.py -k "concat or full_size or graph"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "off_1:g-fused-bf16:MSCRED_LSTM_CONCAT=0" \
  "l1_1:g-fused-bf16" "l12_1:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=225" \
  "off_2:g-fused-bf16:MSCRED_LSTM_CONCAT=0" "l1_2:g-fused-bf16" "l12_2:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=225"
bench_to_log "$D/profile" 110 benchmarks/profile_train_step.py
grep -E "^## |us  \[" "$D/profile/train_step_profile.txt" | head -30
