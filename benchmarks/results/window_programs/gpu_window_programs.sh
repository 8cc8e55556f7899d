#!/usr/bin/env bash
# One device call (~7 min): window_lstm_kernel with a few programs per SM, each carrying window after window
# (MSCRED_WINDOW_LSTM_PROGRAMS), so that the windows in flight -- whose h_{t-1} and c_{t-1} are read back a step
# later -- fit in L2, against one program per window and against the per-step path, at the scoring batch:
#   1. the GPU tests of the per-window kernel and of the model's window path -> gpu_tests.txt
#   2. bench_window_lstm.py: levels 1-2 alone, tiles x programs per SM (0 = one per window), at the scoring batch
#      (3,591 sliding windows) and batch 128 -> window_lstm.{md,json}, best_per_level.txt, bench_log.txt
#   3. bench_train.py's graphed bf16 part (training step, inference, end to end): off (MSCRED_WINDOW_LSTM=0) and
#      on (the kernel forced at every batch on the levels whose best row in 2. beat the per-step path, with that
#      row's tile and programs) -> off.md / on.md (+ log.txt)
# The folder comes back as $OUT/window_programs.tgz (the device returns at most 8 files).
# Usage (repository root, CUDA machine): bash benchmarks/gpu_window_programs.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/window_programs"; mkdir -p "$D"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py tests/test_forward_windows.py \
  -k "window or full_size_bf16 or graphed_window or programs"
bench_to_log "$D" 240 benchmarks/bench_window_lstm.py --tiles 64/8/1/1,64/8/2/0,32/8/2/1,64/8/2/1 \
  --programs 0,1,2,3,4,6
grep -A8 "^Best tile" "$D/window_lstm.md"; cat "$D/best_per_level.txt"
# best_per_level.txt: "CH TILE MS ms (off OFF ms) programs N"
LEVELS=$(awk '$3 < $6 {printf "%s%s", (n++ ? "+" : ""), $1}' "$D/best_per_level.txt")
BLOCKS=$(awk '$3 < $6 {printf "%s%s:%s", (n++ ? ";" : ""), $1, $2}' "$D/best_per_level.txt")
PROGRAMS=$(awk '$3 < $6 {printf "%s%s:%s", (n++ ? ";" : ""), $1, $9}' "$D/best_per_level.txt")
echo "levels that won: ${LEVELS:-none}; tiles $BLOCKS; programs per SM $PROGRAMS"
if [ -n "$LEVELS" ]; then
  PART_TIMEOUT_S=60 bash benchmarks/gpu_train_variants.sh window_programs "off:g-fused-bf16:MSCRED_WINDOW_LSTM=0" \
    "on:g-fused-bf16:MSCRED_WINDOW_LSTM=all:$LEVELS,MSCRED_WINDOW_LSTM_BLOCKS=$BLOCKS,MSCRED_WINDOW_LSTM_PROGRAMS=$PROGRAMS"
fi
(cd "$OUT" && tar czf window_programs.tgz window_programs && rm -rf window_programs)
