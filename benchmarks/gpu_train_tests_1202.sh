#!/usr/bin/env bash
# One device call (~4 min): the whole-model GPU tests after the eighth session's changes to every fused bf16 training
# step (the weight transposes' 4-tap tiles, the small conv's one-copy weight-gradient cast): 50 steps of fused float32
# and bf16 against the reference (tests/test_ops_triton_train.py) and the CUDA-graph training step against eager
# (tests/test_train.py -k graph), after the cell kernels moved to the SFU activations and the recomputed c_t.
# Usage: bash benchmarks/gpu_train_tests_1202.sh. Writes $OUT/train_tests_1202.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir train_tests_1202)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_ops_triton_train.py tests/test_train.py -k "graph or track or fifty or curve"
(cd "$OUT" && tar czf train_tests_1202.tgz train_tests_1202 && rm -rf train_tests_1202)
