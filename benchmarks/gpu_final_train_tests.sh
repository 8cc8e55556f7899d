#!/usr/bin/env bash
# One device call (~3 min): the whole-model training tests on the GPU with the final defaults (the attention split
# at 3 programs per SM since results/attention_partial/), as two pytest processes side by side: the graphed
# full-size step and the fifty-step curves (tests/test_train.py, tests/test_ops_triton_train.py) and the attention's
# own tests. Writes $OUT/final_train_tests/{train,attention}.txt.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir final_train_tests)
bash benchmarks/gpu_pytest.sh "$D/train.txt" 220 tests/test_train.py tests/test_ops_triton_train.py &
bash benchmarks/gpu_pytest.sh "$D/attention.txt" 150 tests/test_ops_triton_attention.py &
wait
