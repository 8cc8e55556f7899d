#!/usr/bin/env bash
# One device call (~9 min) after the memset nodes' kernels became the default: their GPU tests (with mscred env's
# self-check), the graphed steps and scoring of tests/test_train.py, then the bench_train.py table
# (gpu_tests_and_table.sh).
#   bash benchmarks/gpu_memsets_final.sh NAME
exec bash benchmarks/gpu_tests_and_table.sh "${1:-memsets_final}" tests/test_graph_memsets.py tests/test_train.py \
  tests/test_cli.py::test_env_lists_backends
