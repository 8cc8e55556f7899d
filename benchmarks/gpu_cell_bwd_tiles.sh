#!/usr/bin/env bash
# One device call (~6 min): the backward cell kernel with several row tiles per program (convlstm.bwd_tiles).
#   1. bench_cell_bwd_tiles.py: each level's backward per (BLOCK, TILES)                     -> cell_bwd_tiles.md
#   2. the fused ConvLSTM's GPU tests with the sweep's fastest tiles                         -> gpu_tests.txt
#   3. the whole model's graphed bf16 step, default tiles and the fastest in alternation     -> model/
# Usage: bash benchmarks/gpu_cell_bwd_tiles.sh. Writes $OUT/cell_bwd_tiles.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir cell_bwd_tiles)
bench_to_log "$D" 150 benchmarks/bench_cell_bwd_tiles.py
grep -E "^\|" "$D/cell_bwd_tiles.md" || tail -20 "$D/bench_log.txt"
BEST=$(cat "$D/best_tiles.txt" 2>/dev/null)
echo "fastest: ${BEST:-none}"
MSCRED_CELL_BWD_TILES="$BEST" bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 90 tests/test_ops_triton_convlstm.py \
  -k "full_size or bias_gradient or cuda_graph or time_major or autocast or half_cell_state_in_bf16_training"
SPECS=("default_1:g-fused-bf16")
[ -n "$BEST" ] && SPECS+=("tiles_1:g-fused-bf16:MSCRED_CELL_BWD_TILES=$BEST" "default_2:g-fused-bf16"
                         "tiles_2:g-fused-bf16:MSCRED_CELL_BWD_TILES=$BEST")
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "${SPECS[@]}"
(cd "$OUT" && tar czf cell_bwd_tiles.tgz cell_bwd_tiles && rm -rf cell_bwd_tiles)
