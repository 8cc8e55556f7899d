#!/usr/bin/env bash
# One device call (~4.5 min; 259 s on 2026-12-02, results/conv_cell_tile_walk/): the conv + cell kernels with their
# rows walked from tile to tile (no division left in either tile loop; machine code: results/conv_cell_walk_sass/)
# against the default build -- per call (backward and forward at levels 1-2), the kernel tests with the build, and the
# graphed bf16 step in alternation (gpu_conv_cell_ab.sh's stages; written as its own script first, the same stages).
# Usage: bash benchmarks/gpu_conv_cell_tile_walk.sh. Writes $OUT/conv_cell_tile_walk.tgz.
# RETIRED 2026-12-02 (night): the switches it compares were removed once measured (conv_cell_bwd.cu lists them and
# their figures); it would now time the default against itself. To rerun it: git checkout 28b564f.
echo "$0: retired -- its A/B switches were removed from the CUDA sources; run it from commit 28b564f" >&2
exit 2
STEP=1 exec bash benchmarks/gpu_conv_cell_ab.sh conv_cell_tile_walk \
  "walk=-DMSCRED_CONV_CELL_BWD_TILE_WALK=1 -DMSCRED_CONV_CELL_TILE_WALK=1"
