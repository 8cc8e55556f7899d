#!/usr/bin/env bash
# One device call (~5 min): the attention's first split kernel with the last step apart (MSCRED_ATTN_LAST_APART=1:
# the T - 1 earlier steps in a tile without masked rows, 4 for T = 5, and H_T's products from the row loaded anyway;
# by the sm_90 compile 68 / 128 registers forward / backward against 115 / 187, benchmarks/attention_sm90.py).
#   1. bench_attention_split.py: the default (3/1024/4) against the setting at 3, 4 and 6 programs per SM, the
#      step's eight attention calls graph-timed, outputs compared                               -> attention_split.md
#   2. if the fastest setting has the last step apart: the graphed bf16 step, the default against it, in
#      alternation twice, then the attention's GPU tests with it (gpu_setting_ab.sh)  -> model/*.md, model/gpu_tests.txt
#   3. otherwise the attention's GPU tests with MSCRED_ATTN_LAST_APART=${APART_TESTS:-1}          -> gpu_tests.txt
# Usage: bash benchmarks/gpu_attention_apart.sh (run 2026-12-02, results/attention_apart/). The next A/B, the last
# step apart in the backward only: APART_SWEEP="3/1024/4,3/1024/4+apart-bwd" APART_TESTS=bwd bash ...
# Writes $OUT/attention_apart.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir attention_apart)
MSCRED_ATTN_SWEEP=${APART_SWEEP:-3/1024/4,3/1024/4+apart,4/1024/4+apart,6/1024/4+apart} \
  bench_to_log "$D" 120 benchmarks/bench_attention_split.py
grep -A8 "^Sums over" "$D/attention_split.md"
BEST=$(paste -sd, "$D/best_split.env")
echo "fastest: ${BEST:-none}"
if [ -n "$BEST" ] && grep -qE "LAST_APART=(1|bwd)" "$D/best_split.env"; then
  OUT="$D" bash benchmarks/gpu_setting_ab.sh model apart "$BEST" 120 tests/test_ops_triton_attention.py
  grep -h "train fused + CUDA graph" "$D/model/log.txt"
else  # the setting's tests all the same
  env MSCRED_ATTN_LAST_APART=${APART_TESTS:-1} bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 \
    tests/test_ops_triton_attention.py
fi
(cd "$OUT" && tar czf attention_apart.tgz attention_apart && rm -rf attention_apart)
