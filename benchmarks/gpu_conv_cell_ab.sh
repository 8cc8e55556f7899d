#!/usr/bin/env bash
# One device call: conv + cell A/B builds (MSCRED_CONV_CELL_FLAGS) against the default build, most important first:
#   bash benchmarks/gpu_conv_cell_ab.sh NAME LABEL=FLAGS [LABEL=FLAGS...]       (STEP=1: also stage 4)
#   0. every build side by side, forward and backward modules (build_conv_cell)           -> build_<n>*.txt
#   1. bench_conv_cell_bwd.py --variants: split, the default, each build, the default again (the spread), one process
#                                                                                          -> backward/
#   2. bench_conv_cell.py --variants, levels 1 and 2 (level 2's forward kernel is off by default) -> forward/
#   3. per build: tests/test_conv_cell.py -k "not compile" with it (the float64 oracle at five sizes for both
#      kernels, level 2's forward, the full-size model's bf16 epoch against the split path) -> gpu_tests_LABEL.txt
#   4. with STEP=1, the graphed bf16 training step in alternation for the FIRST build: default_1, LABEL_1, default_2,
#      LABEL_2 (gpu_train_variants.sh, each part cut at 45 s; ~4 min more)               -> {default,LABEL}_{1,2}.md
# Packed into $OUT/NAME.tgz after each stage (the device tool brings back at most 8 files), so that a call cut short
# still brings back what it finished. Timeline of its first use (one build, STEP=1, results/conv_cell_tile_walk/):
# built at 37 s, per-call benches done at 61 s, the build's tests at ~130 s, the step at 259 s.
# Its second use (four builds, 282 s, results/conv_cell_next/; two of its switches since removed, run from 28b564f):
#   W="-DMSCRED_CONV_CELL_BWD_TILE_WALK=1 -DMSCRED_CONV_CELL_TILE_WALK=1"
#   bash benchmarks/gpu_conv_cell_ab.sh conv_cell_next "single=-DMSCRED_CONV_CELL_BWD_SINGLE_BUFFER=1" \
#     "single_walk=-DMSCRED_CONV_CELL_BWD_SINGLE_BUFFER=1 $W" "walk=$W" "fwd4=-DMSCRED_CONV_CELL_WARPGROUPS=4"
# With today's switches, e.g.: STEP=1 bash benchmarks/gpu_conv_cell_ab.sh bias "bias=-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1"
set -uo pipefail
NAME=$1; shift
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
pack() { tar czf "$OUT/$NAME.tgz.part" -C "$OUT" "$NAME" && mv "$OUT/$NAME.tgz.part" "$OUT/$NAME.tgz"; }
FLAG_SETS=("")
VARIANTS=""
for spec in "$@"; do FLAG_SETS+=("${spec#*=}"); VARIANTS="$VARIANTS$spec;"; done
build_conv_cell "$D" "${FLAG_SETS[@]}"
echo "built at ${SECONDS}s"; grep -l -i error "$D"/build_*.txt
bench_to_log "$D/backward" 150 benchmarks/bench_conv_cell_bwd.py --variants "${VARIANTS}default_2="
echo "== backward at ${SECONDS}s"; grep -E "^\| (split|kernel)" "$D/backward/conv_cell_bwd.md" | cut -c1-170
bench_to_log "$D/forward" 90 benchmarks/bench_conv_cell.py --variants "${VARIANTS%;}" --variant-levels 1 2
echo "== forward at ${SECONDS}s"; grep -E "^\| [12] " "$D/forward/conv_cell.md" | cut -c1-150
pack
for spec in "$@"; do
  MSCRED_CONV_CELL_FLAGS="${spec#*=}" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_${spec%%=*}.txt" 150 \
    tests/test_conv_cell.py -k "not compile"
  pack
done
if [ "${STEP:-0}" = 1 ]; then
  label=${1%%=*}; flags=${1#*=}
  PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh "$NAME" "default_1:g-fused-bf16" \
    "${label}_1:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$flags" "default_2:g-fused-bf16" \
    "${label}_2:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$flags"
  echo "== step at ${SECONDS}s"
  pack
fi
rm -rf "$D"
