#!/usr/bin/env bash
# One device call (~6 min): the weight gradients on a side CUDA stream (ops/wgrad_stream.py, MSCRED_WGRAD_STREAM=1),
# so that cuDNN's wgrad calls run beside the backward's dependent chain of data gradients instead of inside it.
# First its GPU tests (gradients equal to one stream's, the graphed step's losses) -> $OUT/wgrad_stream/gpu_tests.txt;
# then the graphed bf16 training step in alternation, twice (gpu_train_variants.sh, parts cut at 45 s):
#   default: one stream; wgrad: the weight gradients on the side stream;
#   wgrad_levels: that and levels 2-4 on side streams too (MSCRED_LEVEL_STREAMS=1, which lost alone twice);
#   wgrad_prio: the weight gradients on the side stream, the step captured on a higher-priority stream
#   (MSCRED_CAPTURE_HIGH_PRIORITY=1). WGRAD_SWEEP picks the variants (default: "levels"; "prio" for the second).
# The result folder is wgrad_stream, or wgrad_stream_$WGRAD_SWEEP for a sweep other than the first.
set -uo pipefail
. benchmarks/device_env.sh
SWEEP=${WGRAD_SWEEP:-levels}
NAME=wgrad_stream; [ "$SWEEP" != levels ] && NAME=wgrad_stream_$SWEEP
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_wgrad_stream.py
if [ "$SWEEP" = levels ]; then
  THIRD="wgrad_levels:g-fused-bf16:MSCRED_WGRAD_STREAM=1,MSCRED_LEVEL_STREAMS=1"
else
  THIRD="wgrad_prio:g-fused-bf16:MSCRED_WGRAD_STREAM=1,MSCRED_CAPTURE_HIGH_PRIORITY=1"
fi
IFS=: read -r third_label third_rest <<< "$THIRD"
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh "$NAME" \
  "default_1:g-fused-bf16" "wgrad_1:g-fused-bf16:MSCRED_WGRAD_STREAM=1" "${third_label}_1:$third_rest" \
  "default_2:g-fused-bf16" "wgrad_2:g-fused-bf16:MSCRED_WGRAD_STREAM=1" "${third_label}_2:$third_rest"
grep -h "train fused + CUDA graph + bf16 " "$D/log.txt" | head -8
