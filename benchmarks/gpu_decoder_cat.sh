#!/usr/bin/env bash
# One device call (~4 min): the decoder's bias + SELU written into its skip concatenation
# (ops/triton/bias_act_cat.py, MSCRED_DECODER_CAT_EPILOGUE=1; written 2026-12-04 without device time): its GPU tests
# (tests/test_bias_act_cat.py, and tests/test_train.py -k graph with the switch on), then the graphed bf16 step with
# the switch 0 / 1 in alternation, 3 rounds (gpu_tests_step_ab.sh) -> $OUT/NAME.tgz
#   bash benchmarks/gpu_decoder_cat.sh NAME
MSCRED_DECODER_CAT_EPILOGUE=1 TEST_TIMEOUT_S=200 AB_TIMEOUT_S=200 exec bash benchmarks/gpu_tests_step_ab.sh \
  "${1:-decoder_cat}" MSCRED_DECODER_CAT_EPILOGUE 0,1 3 tests/test_bias_act_cat.py tests/test_train.py -k "cat or graph"
