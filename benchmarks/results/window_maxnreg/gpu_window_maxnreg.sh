#!/usr/bin/env bash
# One device call (~7 min): the per-window ConvLSTM kernel on level 1 with a register cap (maxnreg), so that two to
# four blocks fit on an SM instead of one (ptxas takes 255 registers for the 8-warp tiles; the kernel is bound by
# each program's chain of dependent loads, so more programs per SM is what could make it faster):
#   1. bench_window_lstm.py --tiles: levels 1-2 alone at the scoring batch and batch 128 -> window_lstm.{md,json},
#      best_per_level.txt, bench_log.txt
#   2. the GPU tests of the per-window kernel with level 1's fastest tile forced -> gpu_tests.txt
#   3. if that tile is not the product's: bench_train.py's graphed bf16 part, the defaults and that tile, twice in
#      alternation -> {defaults,level1_tile}_{1,2}.md, log.txt
# The folder comes back as $OUT/window_maxnreg.tgz (the device returns at most 8 files).
# Usage (repository root, CUDA machine): bash benchmarks/gpu_window_maxnreg.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/window_maxnreg"; mkdir -p "$D"
bench_to_log "$D" 130 benchmarks/bench_window_lstm.py \
  --tiles 64/8/1/1,64/8/1/1/128,32/8/1/1/96,32/8/1/1/80,32/4/1/1/128,16/4/1/1/96,64/4/1/1/168,32/8/1/1,64/8/2/0/128
grep -A8 "^Best tile" "$D/window_lstm.md"; cat "$D/best_per_level.txt"
TILE=$(awk '$1 == 32 {print $2}' "$D/best_per_level.txt")
echo "level 1's fastest tile: ${TILE:-none}"
MSCRED_WINDOW_LSTM_BLOCKS="32:${TILE:-64/8/1/1}" bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 100 \
  tests/test_ops_triton_convlstm.py tests/test_forward_windows.py -k "window or full_size_bf16 or graphed_window"
if [ -n "$TILE" ] && [ "$TILE" != "64/8/1/1" ]; then
  bash benchmarks/gpu_train_variants.sh window_maxnreg "defaults_1:g-fused-bf16" \
    "level1_tile_1:g-fused-bf16:MSCRED_WINDOW_LSTM_BLOCKS=32:$TILE" "defaults_2:g-fused-bf16" \
    "level1_tile_2:g-fused-bf16:MSCRED_WINDOW_LSTM_BLOCKS=32:$TILE"
fi
(cd "$OUT" && tar czf window_maxnreg.tgz window_maxnreg && rm -rf window_maxnreg)
