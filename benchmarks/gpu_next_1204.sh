#!/usr/bin/env bash
# One device call (~4 min), written 2026-12-04 after that session's device time was spent, for the next one:
#   1. GPU tests: tests/test_packed_adam.py (its graphed resume test failed on 2026-12-04, results/gpu_tests_1204e/;
#      the fix after it has run on the CPU only), tests/test_weight_transpose.py and tests/test_weight_cache.py
#      (transpose_parts, the weight cache's backward reading the targets' gradients in place)
#   2. env_ab.py: the graphed bf16 training step with MSCRED_WEIGHT_GRAD_PARTS=0 / 1 in alternation (the opt-in
#      switch; the concatenation it removes took 11.4 us, results/graph_timeline_shapes/)
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_next_1204.sh NAME
set -uo pipefail
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-300} AB_TIMEOUT_S=200 bash benchmarks/gpu_tests_step_ab.sh "${1:-next_1204}" \
  MSCRED_WEIGHT_GRAD_PARTS 0,1 3 tests/test_packed_adam.py tests/test_weight_transpose.py tests/test_weight_cache.py
