#!/usr/bin/env bash
# One device call (~3 min): conv1's weight-gradient kernel with fewer programs an SM in the graphed bf16 step, so
# that the weight gradient queued beside it on the side stream (conv2's, cuDNN, whose one-thread workspace kernel
# waited ~41 us for a free SM behind conv1's 8 programs an SM in results/graph_timeline_fold/) starts at once:
# MSCRED_SMALL_CONV_WGRAD_TILE unset (128/4/8) / 128/4/4 / 128/4/2 in alternation, 3 rounds (gpu_tests_step_ab.sh,
# no tests) -> $OUT/NAME.tgz
#   bash benchmarks/gpu_conv1_wgrad_share.sh NAME
AB_TIMEOUT_S=${AB_TIMEOUT_S:-230} exec bash benchmarks/gpu_tests_step_ab.sh "${1:-conv1_wgrad_share}" \
  MSCRED_SMALL_CONV_WGRAD_TILE ",128/4/4,128/4/2" 3
