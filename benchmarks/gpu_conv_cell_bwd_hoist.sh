#!/usr/bin/env bash
# One device call (~5-6 min): the backward step kernel as the default at level 1, its epilogue's loads hoisted above
# the tile's warpgroup-MMA wait (MSCRED_CONV_CELL_BWD_HOIST=1, the default build when this ran on 2026-12-02: its
# rows "default" in results/conv_cell_bwd_hoist/) against loaded row by row (=0, the default since: "rowwise").
#   0. both extensions built per flag set, side by side                                   -> build_*.txt (the 2026-12-02 run's names: build_<n>_extension / _backward)
#   1. bench_conv_cell_bwd.py (split path against the kernel) with each build            -> hoist_{1,0}/conv_cell_bwd.md
#   2. the graphed bf16 step: the defaults (kernel, hoisted) against MSCRED_LSTM_CONV_CELL_BWD=0 (the split path) and
#      against the =0 build, in alternation                                                          -> model/*.md
# The GPU tests of the new defaults: the full suite's call after it (gpu_suite_parallel.sh).
# Usage: bash benchmarks/gpu_conv_cell_bwd_hoist.sh. Writes $OUT/conv_cell_bwd_hoist.tgz.
# RETIRED 2026-12-02 (night): the switches it compares were removed once measured (conv_cell_bwd.cu lists them and
# their figures); it would now time the default against itself. To rerun it: git checkout 28b564f.
echo "$0: retired -- its A/B switches were removed from the CUDA sources; run it from commit 28b564f" >&2
exit 2
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_bwd_hoist)
ROWWISE="-DMSCRED_CONV_CELL_BWD_HOIST=0"; HOISTED="-DMSCRED_CONV_CELL_BWD_HOIST=1"
build_conv_cell "$D" "$HOISTED" "$ROWWISE"  # the four builds side by side
tail -n 3 "$D"/build_*.txt
for spec in "hoist_1:$HOISTED" "hoist_0:$ROWWISE"; do
  label=${spec%%:*}
  MSCRED_CONV_CELL_FLAGS="${spec#*:}" bench_to_log "$D/$label" 120 benchmarks/bench_conv_cell_bwd.py
  echo "== $label"; grep -E "^\| (split|kernel) " "$D/$label/conv_cell_bwd.md" | cut -c1-200
done
PART_TIMEOUT_S=45 OUT="$D" bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$HOISTED" \
  "split_1:g-fused-bf16:MSCRED_LSTM_CONV_CELL_BWD=0" "rowwise_1:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$ROWWISE" \
  "default_2:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$HOISTED" "split_2:g-fused-bf16:MSCRED_LSTM_CONV_CELL_BWD=0" \
  "rowwise_2:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$ROWWISE" > /dev/null 2>&1
grep -h "train fused + CUDA graph" "$D/model/log.txt"
(cd "$OUT" && tar czf conv_cell_bwd_hoist.tgz conv_cell_bwd_hoist && rm -rf conv_cell_bwd_hoist)
