#!/usr/bin/env bash
# One device call (~5 min): level 1's attention backward folded into the ConvLSTM backward
# (ops/triton/convlstm_attention.py, attention_last.py, conv_cell_bwd.cu's attn_* parameters; MSCRED_LSTM_ATTN_FOLD).
#   1. GPU tests: tests/test_convlstm_attention.py (the step kernel making dout_t against the float64 oracle within
#      the unfolded path's error), tests/test_conv_cell.py's backward and training rows (the kernel's other callers)
#   2. env_ab.py: the graphed bf16 training step with MSCRED_LSTM_ATTN_FOLD=0 / unset (the default: level 1 folded)
#      in alternation
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_attn_fold.sh NAME
set -uo pipefail
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-330} AB_TIMEOUT_S=220 bash benchmarks/gpu_tests_step_ab.sh "${1:-attn_fold}" \
  MSCRED_LSTM_ATTN_FOLD 0, 3 tests/test_convlstm_attention.py tests/test_conv_cell.py \
  -k "attention or backward or training or step_outputs"
