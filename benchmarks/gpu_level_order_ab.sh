#!/usr/bin/env bash
# One device call (~5 min): the level-order tests on the GPU, then the graphed bf16 training step with the levels'
# ConvLSTMs called in four orders (MSCRED_LEVEL_ORDER unset = 1234, 4321, 3421, 2341), 3 rounds in alternation. The
# level called first in the forward has its backward run last, right before the encoder's; by default that is
# level 1, whose side-stream weight gradient then runs alone for ~90 us (results/timeline_1206/).
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_level_order_ab.sh NAME
set -uo pipefail
AB_TIMEOUT_S=${AB_TIMEOUT_S:-400} TEST_TIMEOUT_S=150 bash benchmarks/gpu_tests_step_ab.sh "${1:-level_order_ab}" \
  MSCRED_LEVEL_ORDER ",4321,3421,2341" "${ROUNDS:-3}" tests/test_level_order.py tests/test_interleaved_levels.py
