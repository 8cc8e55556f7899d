#!/usr/bin/env bash
# CPU machine: what the conv + cell step kernel compiles to for the H200, read with mscred's own SASS tools. Builds the
# default (level 1's A operand from shared memory) and the first build (A by ldmatrix, MSCRED_CONV_CELL_SMEM_A=0) as
# sm_90a cubins with nvcc, then `mscred sass inspect --loops` of the default (registers, instruction mix, the tile
# loop's size and mix) and `mscred sass diff --loops` from the first build to the default; and the backward step
# kernel's (conv_cell_bwd.cu) inspect.
# Usage: bash benchmarks/conv_cell_sass.sh (needs nvcc and the dev install's mscred). Writes
# ${OUT:-benchmarks/results}/conv_cell_sass/{inspect.txt,diff_ldmatrix_to_default.txt,inspect_backward.txt}.
set -euo pipefail
D=${OUT:-benchmarks/results}/conv_cell_sass
mkdir -p "$D"
W=$(mktemp -d)
SRC=src/mscred/ops/conv_cell/conv_cell.cu
FLAGS=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DMSCRED_SM90A -Isrc/mscred/ops/conv_cell)
nvcc "${FLAGS[@]}" -cubin "$SRC" -o "$W/default.cubin"
nvcc "${FLAGS[@]}" -DMSCRED_CONV_CELL_SMEM_A=0 -cubin "$SRC" -o "$W/ldmatrix.cubin"
nvcc "${FLAGS[@]}" -cubin src/mscred/ops/conv_cell/conv_cell_bwd.cu -o "$W/backward.cubin"
MSCRED=${MSCRED:-$(command -v mscred || echo .venv/bin/mscred)}
{ echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD), $(nvcc --version | tail -1)"
  "$MSCRED" sass inspect --loops --top 12 "$W/default.cubin"; } > "$D/inspect.txt"
{ echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD), $(nvcc --version | tail -1)"
  "$MSCRED" sass diff --loops --top 12 "$W/ldmatrix.cubin" "$W/default.cubin"; } > "$D/diff_ldmatrix_to_default.txt"
{ echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD), $(nvcc --version | tail -1)"
  "$MSCRED" sass inspect --loops --top 12 "$W/backward.cubin"; } > "$D/inspect_backward.txt"
rm -rf "$W"
cat "$D/diff_ldmatrix_to_default.txt"
