#!/usr/bin/env bash
# One device call (~9 min), prepared 2026-12-02 and not run yet (that session's device time was spent): the cell
# kernels' grids as one wave of grid-stride programs (MSCRED_CELL_WAVE, convlstm.wave_grid) against the default
# grids, whose last waves run partly empty by the sm_90 registers (level 1: forward 3.03 waves, backward 2.27).
#   1. bench_cell_math.py --set waves: per level, the cell kernels' time, the level's graphed fwd / bwd, errors
#      against float64, for the default and 9/6, 9/9, 18/12, 4/3 programs per SM            -> cell_waves/bench/
#   2. the grid-stride and SFU GPU tests of the fused ConvLSTM                               -> gpu_tests.txt
#   3. the graphed bf16 step in alternation, default grids and MSCRED_CELL_WAVE=9/6, twice   -> model/
# Usage: bash benchmarks/gpu_cell_waves.sh. Writes $OUT/cell_waves.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir cell_waves)
bench_to_log "$D/bench" 170 benchmarks/bench_cell_math.py --set waves
tail -24 "$D/bench/bench_log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 100 tests/test_ops_triton_convlstm.py -k "grid_stride or wave_grid or sfu"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
  "wave_1:g-fused-bf16:MSCRED_CELL_WAVE=9/6" "default_2:g-fused-bf16" "wave_2:g-fused-bf16:MSCRED_CELL_WAVE=9/6"
(cd "$OUT" && tar czf cell_waves.tgz cell_waves && rm -rf cell_waves)
