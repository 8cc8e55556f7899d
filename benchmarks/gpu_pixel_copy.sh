#!/usr/bin/env bash
# One device call (~3 min): the Triton pixel copy (ops/triton/pixel_copy.py, MSCRED_PIXEL_COPY_KERNEL=1; written
# 2026-12-04 late, with levels 1-2's h_{-1} zeroed in the same pass): its GPU tests, the concatenation's and the
# graphed full-size steps of tests/test_train.py with the switch on, then the graphed bf16 step with the switch 0 / 1
# in alternation, 3 rounds (gpu_tests_step_ab.sh) -> $OUT/NAME.tgz
#   bash benchmarks/gpu_pixel_copy.sh NAME
MSCRED_PIXEL_COPY_KERNEL=1 TEST_TIMEOUT_S=150 AB_TIMEOUT_S=100 exec bash benchmarks/gpu_tests_step_ab.sh \
  "${1:-pixel_copy}" MSCRED_PIXEL_COPY_KERNEL 0,1 3 tests/test_pixel_copy.py tests/test_concat.py tests/test_train.py \
  -k "pixel or concat or cat or cuda_graph_full_size"
