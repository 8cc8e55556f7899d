#!/usr/bin/env bash
# One device call (~9 min): the folded attention's GPU tests again (after results/attn_fold/'s mends) and the graphed
# training step's fused paths with CUDA graphs (tests/test_train.py), then the bench_train.py table on the code with
# the fold the default (gpu_tests_and_table.sh).
#   bash benchmarks/gpu_attn_fold_final.sh NAME
exec bash benchmarks/gpu_tests_and_table.sh "${1:-attn_fold_final}" tests/test_convlstm_attention.py tests/test_train.py
