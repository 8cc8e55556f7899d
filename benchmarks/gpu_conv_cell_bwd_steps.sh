#!/usr/bin/env bash
# One device call (~7 min): the conv + cell kernels' A/B builds written on 2026-12-02 without a GPU, against the
# default build, each through the float64 oracle tests and timed per call:
#   rows  -DMSCRED_CONV_CELL_BWD_ROW_STEPS=1       the backward's staging rows stepped by additions, not divided
#   wg4   -DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1  the backward with four warpgroups sharing one staging buffer
#   both  the two together
#   bias  -DMSCRED_CONV_CELL_PRE_WITH_BIAS=1       the forward storing the gates with the bias, both kernels reading
#                                                  them so (the whole kernel test file; the forward timed too)
# Its 22 files are packed into $OUT/conv_cell_bwd_steps.tgz at the end: the device tool brings back at most 8 files
# (its first run, 2026-12-02, wrote them straight under $OUT and only the build logs came back,
# results/conv_cell_bwd_steps/console.txt has its console). Keep to the 600 s so that the packing runs.
#   0. the builds side by side (forward and backward modules per flag set, VARIANTS' order) -> build_<n>*.txt
#   1. bench_conv_cell_bwd.py --variants: split, the default kernel, each A/B build, the default again (the
#      spread), one process                                                                 -> backward/
#   2. bench_conv_cell.py: the forward, default against the bias build, at levels 1 and 2 (level 2's kernel,
#      0.96x of the split path and off by default, has the same epilogue)                  -> forward/
#   3. per A/B build: tests/test_conv_cell.py -k backward_kernel (the oracle at five sizes, the model epoch; bias:
#      the whole file but its compile checks)                                               -> gpu_tests_LABEL.txt
# 173 s on a cold machine on 2026-12-02 (results/conv_cell_bwd_steps/).
# (Run on 8d6fa31's src, where ROW_STEPS defaulted to 0; since then "rows" is the default build: to repeat the
# comparison, check that src out or add ROW_STEPS=0 as a variant, as gpu_conv_cell_rows_default.sh does.)
# If a build passes its tests and its kernel beats the default's beyond the two default runs' spread, make it the
# default and measure the step in alternation (gpu_setting_ab.sh with MSCRED_CONV_CELL_FLAGS=...).
# Usage: bash benchmarks/gpu_conv_cell_bwd_steps.sh.
# RETIRED 2026-12-02 (night): the switches it compares were removed once measured (conv_cell_bwd.cu lists them and
# their figures); it would now time the default against itself. To rerun it: git checkout 28b564f.
echo "$0: retired -- its A/B switches were removed from the CUDA sources; run it from commit 28b564f" >&2
exit 2
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_bwd_steps)
ROWS="-DMSCRED_CONV_CELL_BWD_ROW_STEPS=1"; WG4="-DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1"
BIAS="-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1"
VARIANTS=("default:" "rows:$ROWS" "wg4:$WG4" "both:$ROWS $WG4" "bias:$BIAS")
build_conv_cell "$D" "" "$ROWS" "$WG4" "$ROWS $WG4" "$BIAS"  # the ten builds side by side, in VARIANTS' order
echo "built at ${SECONDS}s"; grep -l -i error "$D"/build_*.txt
# all the builds' timings in one process (each build's forward stores the gates its backward reads), the default
# first and last; each row printed as it is measured (bench_log.txt), so that a crash keeps the rows before it
bench_to_log "$D/backward" 150 benchmarks/bench_conv_cell_bwd.py \
  --variants "rows=$ROWS;wg4=$WG4;both=$ROWS $WG4;bias=$BIAS;default_2="
echo "== backward at ${SECONDS}s"; grep -E "^\| (split|kernel)" "$D/backward/conv_cell_bwd.md" | cut -c1-200
grep -E "Error|error" "$D/backward/bench_log.txt" | tail -3
bench_to_log "$D/forward" 90 benchmarks/bench_conv_cell.py --variants "bias=$BIAS" --variant-levels 1 2
echo "== forward at ${SECONDS}s"; grep -E "^\| [12] " "$D/forward/conv_cell.md" | cut -c1-160
for spec in "${VARIANTS[@]:1}"; do  # each A/B build's GPU tests
  label=${spec%%:*}; flags=${spec#*:}
  select="backward_kernel"; [ "$label" = bias ] && select="not compile"  # (bias: the forward's tests too)
  MSCRED_CONV_CELL_FLAGS="$flags" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_$label.txt" 120 \
    tests/test_conv_cell.py -k "$select"
done
tar czf "$OUT/conv_cell_bwd_steps.tgz" -C "$OUT" conv_cell_bwd_steps && rm -rf "$D"
