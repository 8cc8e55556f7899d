#!/usr/bin/env bash
# One device call (~8 min): MSCRED_SHARED_GRADS=1 (ops/shared_output.py: the shared bordered buffers' two
# gradients summed in the epilogues' backward kernels) against the default, and its GPU tests.
#   1. the tests of the ops and of the model that it touches, on the GPU, with it on    -> gpu_tests.txt
#   2. the graphed bf16 step off / on / off / on in alternation, one eager baseline      -> model/
# Usage: bash benchmarks/gpu_shared_grads.sh. Writes $OUT/shared_grads.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir shared_grads)
MSCRED_SHARED_GRADS=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_ops_triton_bias_act.py \
  tests/test_ops_triton_small_conv.py tests/test_model.py tests/test_train.py -k "not float64"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "off_1:g-fused-bf16" \
  "on_1:g-fused-bf16:MSCRED_SHARED_GRADS=1" "off_2:g-fused-bf16" "on_2:g-fused-bf16:MSCRED_SHARED_GRADS=1"
(cd "$OUT" && tar czf shared_grads.tgz shared_grads && rm -rf shared_grads)
