#!/usr/bin/env bash
# One device call (~2 min): the graphed bf16 training step with level 1's attention folded (MSCRED_LSTM_ATTN_FOLD
# unset, the default) against not (=0), 5 rounds in alternation: results/attn_fold/ and results/attn_fold_levels/
# disagreed (~19 us against none).
# Writes $OUT/NAME.tgz: NAME/{machine.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_attn_fold_ab.sh NAME
set -uo pipefail
AB_TIMEOUT_S=200 bash benchmarks/gpu_tests_step_ab.sh "${1:-attn_fold_ab}" MSCRED_LSTM_ATTN_FOLD 0, 5
