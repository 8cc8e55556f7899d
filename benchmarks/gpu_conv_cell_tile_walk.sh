#!/usr/bin/env bash
# One device call (~4.5 min; 259 s on 2026-12-02, results/conv_cell_tile_walk/): the conv + cell kernels with their
# rows walked from tile to tile (no division left in either tile loop; machine code: results/conv_cell_walk_sass/)
# against the default build -- per call (backward and forward at levels 1-2), the kernel tests with the build, and the
# graphed bf16 step in alternation (gpu_conv_cell_ab.sh's stages; written as its own script first, the same stages).
# Usage: bash benchmarks/gpu_conv_cell_tile_walk.sh. Writes $OUT/conv_cell_tile_walk.tgz.
STEP=1 exec bash benchmarks/gpu_conv_cell_ab.sh conv_cell_tile_walk \
  "walk=-DMSCRED_CONV_CELL_BWD_TILE_WALK=1 -DMSCRED_CONV_CELL_TILE_WALK=1"
