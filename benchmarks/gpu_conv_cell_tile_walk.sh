#!/usr/bin/env bash
# One device call (~6-7 min): the conv + cell kernels with their rows walked from tile to tile (no division left in
# either tile loop: -DMSCRED_CONV_CELL_BWD_TILE_WALK=1 -DMSCRED_CONV_CELL_TILE_WALK=1, written on 2026-12-02's evening
# without a GPU; machine code: results/conv_cell_walk_sass/) against the default build, most important first:
#   0. both builds side by side (forward and backward modules)                            -> build_<n>*.txt
#   1. bench_conv_cell_bwd.py --variants: split, the default, walk, the default again    -> backward/
#   2. bench_conv_cell.py --variants walk at levels 1 and 2 (level 2's kernel is off by default) -> forward/
#   3. tests/test_conv_cell.py with the walk build (the float64 oracle at five sizes for both kernels, level 2's
#      forward, the model's epoch; not its compile checks)                                 -> gpu_tests_walk.txt
#   4. the graphed bf16 training step in alternation: default_1, walk_1, default_2, walk_2 (gpu_train_variants.sh,
#      each part cut at 45 s)                                                              -> {default,walk}_{1,2}.md
# Packed into $OUT/conv_cell_tile_walk.tgz after each stage (the device tool brings back at most 8 files), so that a
# call cut by the session's remaining device time still brings back what it finished.
# Usage: bash benchmarks/gpu_conv_cell_tile_walk.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=conv_cell_tile_walk
D=$(result_dir $NAME)
WALK="-DMSCRED_CONV_CELL_BWD_TILE_WALK=1 -DMSCRED_CONV_CELL_TILE_WALK=1"
pack() { tar czf "$OUT/$NAME.tgz.part" -C "$OUT" $NAME && mv "$OUT/$NAME.tgz.part" "$OUT/$NAME.tgz"; }
build_conv_cell "$D" "" "$WALK"
echo "built at ${SECONDS}s"; grep -l -i error "$D"/build_*.txt
bench_to_log "$D/backward" 120 benchmarks/bench_conv_cell_bwd.py --variants "walk=$WALK;default_2="
echo "== backward at ${SECONDS}s"; grep -E "^\| (split|kernel)" "$D/backward/conv_cell_bwd.md" | cut -c1-170
bench_to_log "$D/forward" 90 benchmarks/bench_conv_cell.py --variants "walk=$WALK" --variant-levels 1 2
echo "== forward at ${SECONDS}s"; grep -E "^\| [12] " "$D/forward/conv_cell.md" | cut -c1-150
pack
MSCRED_CONV_CELL_FLAGS="$WALK" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_walk.txt" 150 tests/test_conv_cell.py \
  -k "not compile"
pack
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh $NAME "default_1:g-fused-bf16" \
  "walk_1:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$WALK" "default_2:g-fused-bf16" "walk_2:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$WALK"
echo "== step at ${SECONDS}s"
pack && rm -rf "$D"
