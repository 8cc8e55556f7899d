#!/usr/bin/env bash
# One device call (~4 min): the whole-model GPU tests, after a change to every fused bf16 training step: 50 steps of
# fused float32 and bf16 against the reference (tests/test_ops_triton_train.py) and the CUDA-graph training step
# against eager (tests/test_train.py -k graph).
# Usage: bash benchmarks/gpu_train_tests.sh NAME [CAP_S]. Writes $OUT/NAME.tgz (NAME/gpu_tests.txt).
exec bash benchmarks/gpu_pytest_call.sh "$1" "${2:-200}" tests/test_ops_triton_train.py tests/test_train.py \
  -k "graph or track or fifty or curve"
