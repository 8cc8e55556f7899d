#!/usr/bin/env bash
# One device call (~5 min): which weight gradients pay on the side stream (ops/wgrad_stream.py)? With every one
# there (the default) the attention's kernels, which run beside the decoder's weight gradients early in the
# backward, took 0.31 instead of 0.14 ms (results/train_final_1203w/). The graphed bf16 training step in alternation,
# two rounds (gpu_train_variants.sh, parts cut at 45 s):
#   all: the default; keep_decoder: the decoder's weight gradients on the caller's stream
#   (MSCRED_WGRAD_STREAM_KEEP=decoder); keep_decoder_encoder: the ConvLSTMs' only on the side stream.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir wgrad_sites)
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh wgrad_sites \
  "all_1:g-fused-bf16" "keep_decoder_1:g-fused-bf16:MSCRED_WGRAD_STREAM_KEEP=decoder" \
  "keep_decoder_encoder_1:g-fused-bf16:MSCRED_WGRAD_STREAM_KEEP=decoder/encoder" \
  "all_2:g-fused-bf16" "keep_decoder_2:g-fused-bf16:MSCRED_WGRAD_STREAM_KEEP=decoder" \
  "keep_decoder_encoder_2:g-fused-bf16:MSCRED_WGRAD_STREAM_KEEP=decoder/encoder"
grep -h "train fused + CUDA graph + bf16 " "$D/log.txt" | head -8
