#!/usr/bin/env bash
# One device call (~5 min): the attention's backward folded into the Triton cell kernel too (levels 2-4; ATTN in
# convlstm_kernels.cell_bwd_kernel), measured against level 1 alone (the default then) and no fold.
#   1. GPU tests: tests/test_convlstm_attention.py (the cell kernel's fold at every level's size), the training rows of
#      tests/test_ops_triton_convlstm.py (the cell kernel's other callers)
#   2. env_ab.py: the graphed bf16 training step with MSCRED_LSTM_ATTN_FOLD = 0 / unset (level 1) / 1 (every level)
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_attn_fold_levels.sh NAME
set -uo pipefail
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-240} AB_TIMEOUT_S=260 bash benchmarks/gpu_tests_step_ab.sh \
  "${1:-attn_fold_levels}" MSCRED_LSTM_ATTN_FOLD 0,,1 3 tests/test_convlstm_attention.py \
  tests/test_ops_triton_convlstm.py -k "attention or concat or time_major or opcheck or full_size or graph"
