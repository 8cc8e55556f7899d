#!/usr/bin/env bash
# One device call (~6 min): the concatenated-gates ConvLSTM path after the gates became one tensor per step (no
# copy after each cuDNN call; results/concat_step/ had 5 x 13 us of them at level 1).
#   1. its full-size bf16 GPU tests                                                                     -> gpu_tests.txt
#   2. the graphed bf16 step in alternation: off (MSCRED_LSTM_CONCAT=0), on (the default: level 1), twice -> model/
# Usage: bash benchmarks/gpu_concat_step2.sh. Writes $OUT/concat_step2/ (7 files: the tool brings back few).
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir concat_step2)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 60 tests/test_ops_triton_convlstm.py -k "concat and full_size and dtype1"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "off_1:g-fused-bf16:MSCRED_LSTM_CONCAT=0" \
  "on_1:g-fused-bf16" "off_2:g-fused-bf16:MSCRED_LSTM_CONCAT=0" "on_2:g-fused-bf16"
