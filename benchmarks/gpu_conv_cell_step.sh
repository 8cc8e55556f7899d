#!/usr/bin/env bash
# One device call (~5-6 min): the graphed bf16 training step with the CUDA conv + cell step kernel at level 1
# (MSCRED_LSTM_CONV_CELL=${CONV_CELL_SETTING:-1}) against the default, in alternation twice, then the training tests
# and the kernel's tests with it (gpu_setting_ab.sh)                                -> conv_cell_step/model/*.md
# Usage: bash benchmarks/gpu_conv_cell_step.sh. Writes $OUT/conv_cell_step.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_step)
OUT="$D" bash benchmarks/gpu_setting_ab.sh model kernel "MSCRED_LSTM_CONV_CELL=${CONV_CELL_SETTING:-1}" 240 \
  tests/test_train.py tests/test_conv_cell.py
grep -h "train fused + CUDA graph" "$D/model/log.txt"
(cd "$OUT" && tar czf conv_cell_step.tgz conv_cell_step && rm -rf conv_cell_step)
