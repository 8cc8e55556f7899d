#!/usr/bin/env bash
# One device call for the small-channel convolutions' weight gradient with one image a tile (int32 offsets from a
# per-tile base: results/small_conv_tiles/): the working tree against an older one (OLD_SRC, default
# build/old_tree/src, made by `git archive <commit> src | tar -x -C build/old_tree`, carried).
#   1. gpu_tree_ab.sh: both trees built, the op's GPU tests on the working tree (full size, bf16 and float32),
#      the graphed step in alternation (ROUNDS rounds);
#   2. the training step's conv1 / deconv1 backward calls replayed alone under SETTINGS (MSCRED_SMALL_CONV_WGRAD_TILE
#      = pixels a tile / warps / programs per SM; deconv1 keeps its taps-in-N default), old tree then new
#      (bench_bwd_tiles.py --kernel small_conv).
# Writes $OUT/NAME/ (gpu_tree_ab.sh's files) and $OUT/NAME/op_old/, op_new/.
#   bash benchmarks/gpu_small_conv_tiles.sh NAME
set -uo pipefail
NAME=${1:-small_conv_tiles}
SETTINGS=${SETTINGS:-128/4/8,64/4/8,64/4/4,128/4/4,128/4/2,64/4/16,128/8/4,32/4/16}
TESTS=tests/test_ops_triton_small_conv.py bash benchmarks/gpu_tree_ab.sh "$NAME"
. benchmarks/device_env.sh
OLD_SRC=${OLD_SRC:-build/old_tree/src}
D="$OUT/$NAME"
for v in old new; do
  src=src; [ "$v" = old ] && src=$OLD_SRC
  mkdir -p "$D/op_$v"
  TORCH_EXTENSIONS_DIR=/tmp/ext_$v PYTHONPATH=$src timeout "${SWEEP_TIMEOUT_S:-120}" python3 \
    benchmarks/bench_bwd_tiles.py --kernel small_conv --settings "$SETTINGS" --out "$D/op_$v" \
    > "$D/op_$v/bench_log.txt" 2>&1
  echo "sweep $v exit $? at ${SECONDS}s"
done
grep -h "^| small_conv |" "$D"/op_old/bwd_tiles.md "$D"/op_new/bwd_tiles.md 2>/dev/null
echo "done at ${SECONDS}s"
