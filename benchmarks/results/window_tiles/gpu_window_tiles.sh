#!/usr/bin/env bash
# One device call (~8 min): the per-window ConvLSTM kernel's tiles again, with more warps (16: ptxas then keeps a
# thread to 128 registers, where the 8-warp tiles take 255 and one block fills an SM) and PREFETCH 2 (the next pixel
# tile's h_{t-1} taps and c_{t-1} loaded ahead with its gates):
#   1. the GPU tests of the per-window kernel with PREFETCH 2 forced on both levels -> gpu_tests.txt
#   2. bench_window_lstm.py --tiles: levels 1-2 alone at the scoring batch and batch 128 -> window_lstm.{md,json},
#      best_per_level.txt, bench_log.txt
#   3. bench_train.py's graphed bf16 part, twice in alternation: the defaults, and level 1 with the fastest tile of 2.
#      -> {defaults,level1_tile}_{1,2}.md, log.txt
# The folder comes back as $OUT/window_tiles.tgz (the device returns at most 8 files).
# Usage (repository root, CUDA machine): bash benchmarks/gpu_window_tiles.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/window_tiles"; mkdir -p "$D"
MSCRED_WINDOW_LSTM_BLOCKS="32:64/8/1/2;64:64/8/2/2" bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 \
  tests/test_ops_triton_convlstm.py tests/test_forward_windows.py -k "window or full_size_bf16 or graphed_window"
bench_to_log "$D" 150 benchmarks/bench_window_lstm.py \
  --tiles 64/8/1/1,64/8/1/2,64/16/1/1,64/16/1/2,32/8/1/1,32/8/1/2,128/16/1/1,64/8/2/0,64/8/2/2,64/16/2/0
grep -A8 "^Best tile" "$D/window_lstm.md"; cat "$D/best_per_level.txt"
TILE=$(awk '$1 == 32 {print $2}' "$D/best_per_level.txt")
echo "level 1's fastest tile: ${TILE:-none}"
if [ -n "$TILE" ] && [ "$TILE" != "64/8/1/1" ]; then
  bash benchmarks/gpu_train_variants.sh window_tiles "defaults_1:g-fused-bf16" \
    "level1_tile_1:g-fused-bf16:MSCRED_WINDOW_LSTM_BLOCKS=32:$TILE" "defaults_2:g-fused-bf16" \
    "level1_tile_2:g-fused-bf16:MSCRED_WINDOW_LSTM_BLOCKS=32:$TILE"
fi
(cd "$OUT" && tar czf window_tiles.tgz window_tiles && rm -rf window_tiles)
