#!/usr/bin/env bash
# One device call (~8 min): the packed weight casts (ops/weight_cache.py + ops/triton/gather_cast.py, since replaced by
# ops/triton/weight_transpose.py: run this at 3843f79) and the
# attention split over D (ops/triton/attention.py) on the whole step, against an earlier tree, and their tests.
#   1. GPU tests of the touched ops and of the model / training                           -> gpu_tests.txt
#   2. the attention's split settings at the training shapes (bench_attention_split.py)    -> attention/
#   3. the graphed bf16 step in alternation with build/before/src (gpu_step_ab.sh's parts) -> model/
# Usage: bash benchmarks/gpu_pack_split.sh (build/before/src carried). Writes $OUT/pack_split.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir pack_split)
[ -d build/before/src ] || { echo "build/before/src missing"; exit 2; }
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_gather_cast.py tests/test_weight_cache.py \
  tests/test_ops_triton_attention.py tests/test_train.py tests/test_model.py -k "not float64"
bench_to_log "$D/attention" 90 benchmarks/bench_attention_split.py
tail -12 "$D/attention/bench_log.txt"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "before_1:g-fused-bf16:PYTHONPATH=build/before/src" \
  "after_1:g-fused-bf16" "before_2:g-fused-bf16:PYTHONPATH=build/before/src" "after_2:g-fused-bf16"
(cd "$OUT" && tar czf pack_split.tgz pack_split && rm -rf pack_split)
