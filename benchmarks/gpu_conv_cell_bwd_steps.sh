#!/usr/bin/env bash
# One device call (~5-6 min): the backward step kernel's A/B builds written on 2026-12-02 without a GPU, against the
# default build, each through the float64 oracle tests and timed per call:
#   rows  -DMSCRED_CONV_CELL_BWD_ROW_STEPS=1       each staging thread's rows stepped by additions, not divided
#   wg4   -DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1  four warpgroups a block sharing one staging buffer
#   both  the two together
# Results go straight under $OUT (no tar), so that a cut call still brings back what it finished.
#   0. the builds side by side (forward and backward modules per flag set)                   -> build_*.txt
#   1. tests/test_conv_cell.py -k backward_kernel with each A/B build (the oracle at five sizes, the model epoch)
#                                                                                            -> gpu_tests_LABEL.txt
#   2. bench_conv_cell_bwd.py with each build, the default first and last (split path against the kernel)
#                                                                                            -> LABEL/conv_cell_bwd.md
# If a build passes its tests and its kernel beats the default's beyond the two default runs' spread, make it the
# default and measure the step in alternation (gpu_setting_ab.sh with MSCRED_CONV_CELL_FLAGS=...).
# Usage: bash benchmarks/gpu_conv_cell_bwd_steps.sh.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_bwd_steps)
ROWS="-DMSCRED_CONV_CELL_BWD_ROW_STEPS=1"; WG4="-DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1"
VARIANTS=("default:" "rows:$ROWS" "wg4:$WG4" "both:$ROWS $WG4")
for spec in "${VARIANTS[@]}"; do
  label=${spec%%:*}
  for module in _extension _backward; do
    MSCRED_CONV_CELL_FLAGS="${spec#*:}" timeout 240 python3 -c \
      "from mscred.ops import conv_cell; conv_cell.$module()" > "$D/build_${label}$module.txt" 2>&1 &
  done
done
wait
echo "built at ${SECONDS}s"; grep -l -i error "$D"/build_*.txt
for spec in "${VARIANTS[@]:1}"; do
  label=${spec%%:*}
  MSCRED_CONV_CELL_FLAGS="${spec#*:}" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_$label.txt" 90 \
    tests/test_conv_cell.py -k "backward_kernel"
done
for spec in "${VARIANTS[@]}" "default_2:"; do
  label=${spec%%:*}
  MSCRED_CONV_CELL_FLAGS="${spec#*:}" bench_to_log "$D/$label" 60 benchmarks/bench_conv_cell_bwd.py
  echo "== $label at ${SECONDS}s"; grep -E "^\| (split|kernel) " "$D/$label/conv_cell_bwd.md" | cut -c1-200
done
