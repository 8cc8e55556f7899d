#!/usr/bin/env bash
# One device call (~8 min): bf16 inference with one program per window through every ConvLSTM step
# (window_lstm_kernel, ops/triton/convlstm_window.py) against the per-step path (cuDNN recurrent convolution + cell
# kernel):
#   1. the GPU tests of the fused op's inference and of the model's window path -> $OUT/window_lstm/gpu_tests.txt
#   2. bench_window_lstm.py: each level alone at the scoring batch (3,591 sliding windows; a tile sweep) and at
#      batch 128 -> $OUT/window_lstm/{window_lstm.md,json,best_blocks.txt,best_per_level.txt}
#   3. bench_train.py's graphed bf16 part (training step, inference, end to end) with MSCRED_WINDOW_LSTM=0 and =1
#      (each level's best tile from 2.) -> $OUT/window_lstm/{off,on}.md; =1 is the product's batch gate, so only its
#      rows of 256-1,024 windows differ (bench_window_model.py A/Bs every batch)
# Usage (repository root, CUDA machine): bash benchmarks/gpu_window_lstm.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir window_lstm)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py tests/test_forward_windows.py \
  -k "window or full_size_bf16 or graphed_window"
{
  bash benchmarks/machine_info.sh
  timeout 300 python3 benchmarks/bench_window_lstm.py --out "$D"
  echo "bench_window_lstm exit $?"
} > "$D/bench_log.txt" 2>&1
grep -A12 "^Best tile" "$D/bench_log.txt"; cat "$D/best_per_level.txt"
BLOCKS=$(awk '{printf "%s%s:%s", (NR > 1 ? ";" : ""), $1, $2}' "$D/best_per_level.txt" 2>/dev/null)
echo "A/B tiles: ${BLOCKS:-defaults}"
PART_TIMEOUT_S=60 bash benchmarks/gpu_train_variants.sh window_lstm "off:g-fused-bf16:MSCRED_WINDOW_LSTM=0" \
  "on:g-fused-bf16:MSCRED_WINDOW_LSTM=1${BLOCKS:+,MSCRED_WINDOW_LSTM_BLOCKS=$BLOCKS}"
