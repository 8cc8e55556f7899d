#!/usr/bin/env bash
# One device call for the small-channel convolutions' weight gradient with one image a tile (int32 offsets from a
# per-tile base; results/small_conv_tiles/): the working tree against an older one (OLD_SRC, default
# build/old_tree/src, made by `git archive <commit> src | tar -x -C build/old_tree`, carried). gpu_tree_ab.sh:
#   1. both trees built, the op's GPU tests on the working tree (full size, bf16 and float32);
#   2. (BEFORE_TIMING) the training step's conv1 / deconv1 backward calls replayed alone under SETTINGS
#      (MSCRED_SMALL_CONV_WGRAD_TILE = pixels a tile / warps / programs per SM; deconv1 keeps its taps-in-N default),
#      old tree then new (bench_bwd_tiles.py --kernel small_conv); the new tree's fastest setting is kept;
#   3. the graphed step in alternation (ROUNDS rounds), the new tree under that setting.
# Writes $OUT/NAME.tgz (the whole result folder: the device returns at most 8 files) and $OUT/NAME_summary.txt.
#   bash benchmarks/gpu_small_conv_tiles.sh NAME
set -uo pipefail
NAME=${1:-small_conv_tiles}
. benchmarks/device_env.sh
D="$OUT/$NAME"
mkdir -p "$D"
export SETTINGS=${SETTINGS:-128/4/8,128/8/1,128/8/2,128/8/4,64/4/3,64/4/6,64/4/12,64/8/2,64/8/4}
export OLD_SRC=${OLD_SRC:-build/old_tree/src} D
SWEEPS='for v in old new; do
  src=src; [ "$v" = old ] && src=$OLD_SRC
  mkdir -p "$D/op_$v"
  TORCH_EXTENSIONS_DIR=/tmp/ext_$v PYTHONPATH=$src timeout "${SWEEP_TIMEOUT_S:-150}" python3 \
    benchmarks/bench_bwd_tiles.py --kernel small_conv --settings "$SETTINGS" --out "$D/op_$v" \
    > "$D/op_$v/bench_log.txt" 2>&1
  echo "sweep $v exit $? at ${SECONDS}s"
  grep -h "^| small_conv |" "$D/op_$v/bwd_tiles.md"
done'
{ TESTS=tests/test_ops_triton_small_conv.py BEFORE_TIMING=$SWEEPS NEW_ENV_FILE=$D/op_new/best_tiles.env \
    bash benchmarks/gpu_tree_ab.sh "$NAME"; echo "done at ${SECONDS}s"; } 2>&1 | tee "$OUT/${NAME}_summary.txt"
tar czf "$OUT/$NAME.tgz" -C "$OUT" "$NAME" && rm -rf "$D"
