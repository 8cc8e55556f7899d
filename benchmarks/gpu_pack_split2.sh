#!/usr/bin/env bash
# One device call (~8 min), after gpu_pack_split.sh: the attention split's second sweep around its best setting,
# the whole step in alternation with build/before/src, the attention's GPU tests and the step's profile.
#   1. tests/test_ops_triton_attention.py on the GPU                                      -> gpu_tests.txt
#   2. bench_attention_split.py over MSCRED_ATTN_SWEEP's settings                           -> attention/
#   3. the graphed bf16 step in alternation with build/before/src                          -> model/
#   4. profile_train_step.py: where the step's time goes now                               -> train_step_profile.txt
# Usage: bash benchmarks/gpu_pack_split2.sh (build/before/src carried). Writes $OUT/pack_split2.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir pack_split2)
[ -d build/before/src ] || { echo "build/before/src missing"; exit 2; }
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 60 tests/test_ops_triton_attention.py
MSCRED_ATTN_SWEEP="0/1024/4,4/1024/4,2/1024/4,3/1024/4,6/1024/4,2/2048/4,3/2048/4,4/2048/4,4/2048/8" \
  bench_to_log "$D/attention" 80 benchmarks/bench_attention_split.py
grep -A14 "^Sums over" "$D/attention/attention_split.md"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "before_1:g-fused-bf16:PYTHONPATH=build/before/src" \
  "after_1:g-fused-bf16" "before_2:g-fused-bf16:PYTHONPATH=build/before/src" "after_2:g-fused-bf16"
bench_to_log "$D" 110 benchmarks/profile_train_step.py
grep "^## " "$D/train_step_profile.txt"
(cd "$OUT" && tar czf pack_split2.tgz pack_split2 && rm -rf pack_split2)
