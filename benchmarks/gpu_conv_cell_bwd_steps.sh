#!/usr/bin/env bash
# One device call (~3 min): the backward step kernel's staging with each thread's rows stepped by additions
# (MSCRED_CONV_CELL_BWD_ROW_STEPS=1, written 2026-12-02 without a GPU) against every chunk's row decoded by divisions
# (=0, the default build). Results go straight under $OUT (no tar), so that a cut call still brings back what it
# finished. If the tests pass and the kernel's share drops beyond the spread, make 1 the default and measure the
# step in alternation (gpu_setting_ab.sh with MSCRED_CONV_CELL_FLAGS=-DMSCRED_CONV_CELL_BWD_ROW_STEPS=1).
#   0. the four builds side by side                                                        -> build_*.txt
#   1. the backward kernel's GPU tests with the stepped build (the float64 oracle at five sizes, the model epoch)
#                                                                                          -> gpu_tests.txt
#   2. bench_conv_cell_bwd.py with each build (split path against the kernel, one run each) -> steps_{1,0}/
# Usage: bash benchmarks/gpu_conv_cell_bwd_steps.sh.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_bwd_steps)
STEPPED="-DMSCRED_CONV_CELL_BWD_ROW_STEPS=1"
i=0
for flags in "$STEPPED" ""; do
  for module in _extension _backward; do
    MSCRED_CONV_CELL_FLAGS="$flags" timeout 200 python3 -c \
      "from mscred.ops import conv_cell; conv_cell.$module()" > "$D/build_${i}$module.txt" 2>&1 &
  done
  i=$((i + 1))
done
wait
echo "built at ${SECONDS}s"
MSCRED_CONV_CELL_FLAGS="$STEPPED" bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 90 tests/test_conv_cell.py \
  -k "backward_kernel"
for spec in "steps_1:$STEPPED" "steps_0:"; do
  label=${spec%%:*}
  MSCRED_CONV_CELL_FLAGS="${spec#*:}" bench_to_log "$D/$label" 60 benchmarks/bench_conv_cell_bwd.py
  echo "== $label at ${SECONDS}s"; grep -E "^\| (split|kernel) " "$D/$label/conv_cell_bwd.md" | cut -c1-200
done
