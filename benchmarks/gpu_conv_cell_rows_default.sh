#!/usr/bin/env bash
# One device call (~6 min): the backward step kernel with its staging rows stepped (MSCRED_CONV_CELL_BWD_ROW_STEPS=1,
# the default since 2026-12-02's evening, results/conv_cell_bwd_steps/) against the divided build it replaced
# (ROW_STEPS=0), per call and in the graphed bf16 training step, then the kernel's test file on the new default.
#   0. both builds side by side                                                          -> build_<n>*.txt
#   1. bench_conv_cell_bwd.py --variants: split, the default, the divided build, the default again, one process
#                                                                                        -> backward/
#   2. bench_train.py's graphed bf16 step in alternation: default_1, divided_1, default_2, divided_2 (each part cut
#      at 45 s, gpu_train_variants.sh)                                 -> {default,divided}_{1,2}.md, log.txt
#   3. tests/test_conv_cell.py whole on the default build (the oracle at five sizes, the model's epoch, the compile
#      checks)                                                                           -> gpu_tests.txt
# More than the device tool's 8 files: everything is packed into $OUT/conv_cell_rows_default.tgz at the end.
# Usage: bash benchmarks/gpu_conv_cell_rows_default.sh
# RETIRED 2026-12-02 (night): the switches it compares were removed once measured (conv_cell_bwd.cu lists them and
# their figures); it would now time the default against itself. To rerun it: git checkout 28b564f.
echo "$0: retired -- its A/B switches were removed from the CUDA sources; run it from commit 28b564f" >&2
exit 2
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=conv_cell_rows_default
D=$(result_dir $NAME)
DIVIDED="-DMSCRED_CONV_CELL_BWD_ROW_STEPS=0"
build_conv_cell "$D" "" "$DIVIDED"
echo "built at ${SECONDS}s"; grep -l -i error "$D"/build_*.txt
bench_to_log "$D/backward" 150 benchmarks/bench_conv_cell_bwd.py --variants "divided=$DIVIDED;default_2="
echo "== backward at ${SECONDS}s"; grep -E "^\| (split|kernel)" "$D/backward/conv_cell_bwd.md" | cut -c1-160
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh $NAME "default_1:g-fused-bf16" \
  "divided_1:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$DIVIDED" "default_2:g-fused-bf16" \
  "divided_2:g-fused-bf16:MSCRED_CONV_CELL_FLAGS=$DIVIDED"
echo "== step at ${SECONDS}s"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_conv_cell.py
echo "== tests at ${SECONDS}s"
tar czf "$OUT/$NAME.tgz" -C "$OUT" $NAME && rm -rf "$D"
