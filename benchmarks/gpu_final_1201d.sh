#!/usr/bin/env bash
# One device call (~7 min): the weight transposes (ops/triton/weight_transpose.py) and the skip concatenations
# written by their producers (ops/skip_epilogue.py) on the whole step, against an earlier tree, and their tests.
#   1. GPU tests of the two and of the model                                               -> gpu_tests.txt
#   2. the graphed bf16 step: before / after / after with MSCRED_SKIP_EPILOGUE=0 / before / after   -> model/
# Usage: bash benchmarks/gpu_final_1201d.sh (build/before/src carried). Writes $OUT/final_1201d.tgz. As run at
# a77e522: ops/skip_epilogue.py was removed since (no gain), so rerun it there.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir final_1201d)
[ -d build/before/src ] || { echo "build/before/src missing"; exit 2; }
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 90 tests/test_weight_transpose.py tests/test_weight_cache.py \
  tests/test_model.py -k "not float64"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "before_1:g-fused-bf16:PYTHONPATH=build/before/src" \
  "after_1:g-fused-bf16" "noskip_1:g-fused-bf16:MSCRED_SKIP_EPILOGUE=0" \
  "before_2:g-fused-bf16:PYTHONPATH=build/before/src" "after_2:g-fused-bf16"
(cd "$OUT" && tar czf final_1201d.tgz final_1201d && rm -rf final_1201d)
