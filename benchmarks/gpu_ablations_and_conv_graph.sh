#!/usr/bin/env bash
# One device call (<= ~420 s): the changes of 2026-11-29's fourth session, measured.
#   1. GPU tests of what changed: the small-channel conv in float32 (tf32x3 dots) at full size, the Trainer's and
#      predict's CUDA graphs (predict now replays GraphedWindowInference), the shared-segment graph (<= 120 s)
#      -> $OUT/ablations/gpu_tests.txt
#   2. gpu_train_variants.sh ablations: the small-channel conv in float32 (forced with MSCRED_SMALL_CONV=all;
#      tf32x3 dots) against cuDNN on the graphed float32 step and inference; the ConvLSTM levels' padded copy
#      (off / on) on the graphed bf16 step, inference and end to end; the eager part once (with the scoring profile)
#      -> $OUT/ablations/{tf32x3,cudnn,padded_off,padded_on}.md, log.txt
#      The committed results (results/ablations/) ran at commit 77fb6d8, when float32 used the op by default and
#      MSCRED_SMALL_CONV_FP32_DOTS=ieee picked exact dots (the ieee.md row); that switch went with the decision the
#      run led to (float32 on cuDNN). `git checkout 77fb6d8` reruns those rows as they were.
#   3. bench_conv.py --timing graph: the encoder convolutions replayed from CUDA graphs (host time out of the
#      timings) -> $OUT/conv_graph/{conv.md,conv.json}, conv.log
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_ablations_and_conv_graph.sh
set -uo pipefail
. benchmarks/device_env.sh
mkdir -p "$OUT/ablations" "$OUT/conv_graph"
bash benchmarks/gpu_pytest.sh "$OUT/ablations/gpu_tests.txt" 120 tests/test_ops_triton_small_conv.py \
  tests/test_train.py tests/test_forward_windows.py -k "full_size or graph or predict or fused_model"
PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh ablations \
  tf32x3:g-fused:MSCRED_SMALL_CONV=all cudnn:g-fused \
  padded_off:g-fused-bf16:MSCRED_LSTM_PADDED_COPY=0 padded_on:g-fused-bf16
timeout 130 python3 benchmarks/bench_conv.py --timing graph --out "$OUT/conv_graph" > "$OUT/conv_graph/conv.log" 2>&1
echo "bench_conv exit code $?" >> "$OUT/conv_graph/conv.log"
tail -6 "$OUT/conv_graph/conv.log"
