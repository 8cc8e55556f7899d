#!/usr/bin/env bash
# The calls of 2026-12-02 (results/train_tests_1202/; the first, on a machine left warm with a stale build lock:
# results/train_tests_1202_stale_lock/): the whole-model GPU tests after the cell kernels' SFU activations and the
# recomputed c_t. Usage: bash benchmarks/gpu_train_tests_1202.sh.
exec bash benchmarks/gpu_train_tests.sh train_tests_1202 200
