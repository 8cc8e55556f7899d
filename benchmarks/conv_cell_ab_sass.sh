#!/usr/bin/env bash
# CPU machine: what the conv + cell kernels' A/B builds written without a GPU (2026-12-02) change in the machine code,
# read with mscred's own SASS tools: each build compiled for sm_90a with nvcc, then `mscred sass diff --loops` from
# the default build to it (registers, the instruction mix, the loops' sizes). Compiled code and our reading, not GPU
# measurements: benchmarks/gpu_conv_cell_bwd_steps.sh times them.
#   backward_rows.txt  -DMSCRED_CONV_CELL_BWD_ROW_STEPS=1        backward_wg4.txt  -DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1
#   backward_both.txt  the two                                   backward_bias.txt / forward_bias.txt
#                                                                                  -DMSCRED_CONV_CELL_PRE_WITH_BIAS=1
# Usage: bash benchmarks/conv_cell_ab_sass.sh (needs nvcc and the dev install's mscred with pyelftools). Writes
# ${OUT:-benchmarks/results}/conv_cell_ab_sass/*.txt.
set -euo pipefail
D=${OUT:-benchmarks/results}/conv_cell_ab_sass
mkdir -p "$D"
W=$(mktemp -d)
FLAGS=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DMSCRED_SM90A -Isrc/mscred/ops/conv_cell)
MSCRED=${MSCRED:-$(command -v mscred || echo .venv/bin/mscred)}
HEADER="# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD), $(nvcc --version | tail -1)"
build() {  # build NAME SOURCE [FLAGS...]
  local name=$1 src=$2; shift 2
  nvcc "${FLAGS[@]}" "$@" -cubin "src/mscred/ops/conv_cell/$src" -o "$W/$name.cubin"
}
build backward_default conv_cell_bwd.cu
build backward_rows conv_cell_bwd.cu -DMSCRED_CONV_CELL_BWD_ROW_STEPS=1
build backward_wg4 conv_cell_bwd.cu -DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1
build backward_both conv_cell_bwd.cu -DMSCRED_CONV_CELL_BWD_ROW_STEPS=1 -DMSCRED_CONV_CELL_BWD_SHARED_STAGING=1
build backward_bias conv_cell_bwd.cu -DMSCRED_CONV_CELL_PRE_WITH_BIAS=1
build forward_default conv_cell.cu
build forward_bias conv_cell.cu -DMSCRED_CONV_CELL_PRE_WITH_BIAS=1
for variant in backward_rows backward_wg4 backward_both backward_bias forward_bias; do
  { echo "$HEADER"; echo "# ${variant%%_*}: default build -> ${variant#*_}"
    "$MSCRED" sass diff --loops --top 12 "$W/${variant%%_*}_default.cubin" "$W/$variant.cubin"; } > "$D/$variant.txt"
done
rm -rf "$W"
head -30 "$D/backward_rows.txt"
