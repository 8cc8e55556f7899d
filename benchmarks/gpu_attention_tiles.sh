#!/usr/bin/env bash
# One device call (~5 min): the attention forward's tile sweep on the scoring path (bench_attention_tiles.py), then
# bench_train.py's graphed bf16 part with the previous forward tile (MSCRED_ATTN_FWD_TILE=2048/16) and the new
# default beside one eager baseline run (gpu_train_variants.sh).
# Writes $OUT/attention_tiles/{attention_tiles.md,attention_tiles.json,bench_log.txt,before.md,after.md,log.txt}.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_attention_tiles.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/attention_tiles"
bench_to_log "$D" 120 benchmarks/bench_attention_tiles.py
grep -E "^\|" "$D/bench_log.txt" | tail -42
bash benchmarks/gpu_train_variants.sh attention_tiles "before:g-fused-bf16:MSCRED_ATTN_FWD_TILE=2048/16" \
  "after:g-fused-bf16"
