#!/usr/bin/env bash
# One device call (~7 min; run 2026-12-01, results/concat_levels/): the concatenated-gates ConvLSTM path (ops/triton/convlstm_concat.py) at
# levels 1-2 against level 1 alone, now that the path hands its gates out per step (its first version measured
# levels 1-2 at 3.240 / 3.240 against 3.215 / 3.225 ms with level 1 alone, results/concat_step_first/, when copies
# after every convolution hid the difference), and the profile of the current default.
#   1. the ConvLSTM file's GPU tests                                                                   -> gpu_tests.txt
#   2. the graphed bf16 step in alternation: level 1 (the default), levels 1-2 (MIN_PIXELS=225), twice -> model/
#   3. profile_train_step.py with the default                                                          -> profile/
# Usage: bash benchmarks/gpu_concat_levels.sh. Writes $OUT/concat_levels.tgz. If levels 1-2 win, set
# convlstm_concat.MIN_PIXELS = 225 and its rule test.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir concat_levels)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py -k "concat or opcheck or graph"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "l1_1:g-fused-bf16" \
  "l12_1:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=225" "l1_2:g-fused-bf16" \
  "l12_2:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=225"
bench_to_log "$D/profile" 110 benchmarks/profile_train_step.py
grep -E "^## |us  \[" "$D/profile/train_step_profile.txt" | head -30
(cd "$OUT" && tar czf concat_levels.tgz concat_levels && rm -rf concat_levels)
