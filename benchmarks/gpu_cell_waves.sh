#!/usr/bin/env bash
# One device call (~9 min), prepared 2026-12-02 and not run yet (that session's device time was spent): the cell
# kernels' grids as one wave of grid-stride programs (MSCRED_CELL_WAVE, convlstm.wave_grid) against the default
# grids, whose last waves run partly empty by the sm_90 registers (results/cell_kernel_sass/: level 1's forward
# 3.03 waves, its backward 2.27) -- bench_cell_math.py --set waves (the default and 9/6, 9/9, 18/12, 4/3 programs
# per SM), the grid-stride and SFU GPU tests, and the graphed bf16 step in alternation, default grids and
# MSCRED_CELL_WAVE=9/6, twice.
# Ran 2026-12-02 (results/cell_waves/). Its forward counts (9/6) need the tree of that day (e4e158c): the forward's
# grid-stride path was removed after it lost, and MSCRED_CELL_WAVE now takes the backward's count alone.
# Usage: bash benchmarks/gpu_cell_waves.sh. Writes $OUT/cell_waves.tgz.
exec bash benchmarks/gpu_cell_call.sh cell_waves waves 170 100 "grid_stride or wave_grid or sfu" \
  "default_1:g-fused-bf16" "wave_1:g-fused-bf16:MSCRED_CELL_WAVE=9/6" \
  "default_2:g-fused-bf16" "wave_2:g-fused-bf16:MSCRED_CELL_WAVE=9/6"
