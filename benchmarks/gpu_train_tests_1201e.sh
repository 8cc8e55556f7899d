#!/usr/bin/env bash
# The call of 2026-12-01's eighth session (results/train_tests_1201e/): the whole-model GPU tests after the weight
# transposes' 4-tap tiles and the small conv's one-copy weight-gradient cast. Usage: bash benchmarks/gpu_train_tests_1201e.sh.
exec bash benchmarks/gpu_train_tests.sh train_tests_1201e 230
