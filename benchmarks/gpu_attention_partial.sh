#!/usr/bin/env bash
# One device call (~4 min; run 2026-12-02, results/attention_partial/): the attention's first split kernel with a
# tile of its own (MSCRED_ATTN_PARTIAL_TILE; it read H at about half the copy rate in the graphed step, 187
# registers a thread backward at the split's 1024 x 4 warps, results/step_profile_final/,
# docs/training-kernel-plan.md).
#   1. bench_attention_split.py over the settings below (the default first), the step's eight attention calls
#      graph-timed, outputs compared                                                    -> attention_split.md
#   2. the graphed bf16 step, the default against the sweep's fastest setting, in alternation twice
#      (2-3: gpu_setting_ab.sh)                                                        -> model/*.md, log.txt
#   3. the attention's GPU tests with that setting                                -> model/gpu_tests.txt
# Usage: bash benchmarks/gpu_attention_partial.sh. Writes $OUT/attention_partial.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir attention_partial)
SWEEP="4/1024/4,4/1024/4+1024/8,4/1024/4+512/4,4/1024/4+2048/16,3/1024/4,3/1024/4+1024/8,3/1024/4+512/4"
SWEEP="$SWEEP,2/1024/4+1024/8,2/1024/4+512/4"
MSCRED_ATTN_SWEEP=$SWEEP bench_to_log "$D" 150 benchmarks/bench_attention_split.py
grep -A12 "^Sums over" "$D/attention_split.md"
BEST=$(paste -sd, "$D/best_split.env")
echo "fastest: ${BEST:-none}"
if [ -n "$BEST" ]; then
  OUT="$D" bash benchmarks/gpu_setting_ab.sh model best "$BEST" 150 tests/test_ops_triton_attention.py
  grep -h "train fused + CUDA graph" "$D/model/log.txt"
fi
(cd "$OUT" && tar czf attention_partial.tgz attention_partial && rm -rf attention_partial)
