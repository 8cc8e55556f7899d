#!/usr/bin/env bash
# One device call (~4 min): level 2's copies beside the chain (ops/side_copies.py, MSCRED_LSTM_SIDE_COPIES=1): its
# GPU tests (tests/test_side_copies.py), then the graphed bf16 step with the switch 0 / 1 in alternation, 3 rounds
# (gpu_tests_step_ab.sh) -> $OUT/NAME.tgz
#   bash benchmarks/gpu_side_copies.sh NAME
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150} AB_TIMEOUT_S=${AB_TIMEOUT_S:-200} exec bash benchmarks/gpu_tests_step_ab.sh \
  "${1:-side_copies}" MSCRED_LSTM_SIDE_COPIES 0,1 3 tests/test_side_copies.py
