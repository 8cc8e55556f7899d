#!/usr/bin/env bash
# CPU machine: what the conv + cell kernels' A/B builds change in the machine code, read with mscred's own SASS
# tools: each build compiled for sm_90a with nvcc, then `mscred sass diff --loops` from the kernel's default build
# to it (registers, the instruction mix, the loops' sizes). Compiled code and our reading, not GPU measurements.
#   bash benchmarks/conv_cell_ab_sass.sh [FOLDER VARIANT...]    VARIANT = KERNEL_LABEL:FLAGS (KERNEL: forward, backward)
# Writes ${OUT:-benchmarks/results}/FOLDER/KERNEL_LABEL.txt. Without arguments, the gates stored with the bias
# (backward_bias, forward_bias) against the defaults. The folders results/conv_cell_ab_sass/ and conv_cell_walk_sass/
# hold builds whose switches were removed once measured (the stepped rows and the tile walks are the default since,
# the shared staging lost; conv_cell_bwd.cu lists them): to rerun those, check out commit 28b564f.
# Needs nvcc and the dev install's mscred with pyelftools.
set -euo pipefail
FOLDER=${1:-conv_cell_ab_sass}; [ $# -gt 0 ] && shift
VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(
  "backward_bias:-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1" "forward_bias:-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1")
D=${OUT:-benchmarks/results}/$FOLDER
mkdir -p "$D"
W=$(mktemp -d)
FLAGS=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DMSCRED_SM90A -Isrc/mscred/ops/conv_cell)
MSCRED=${MSCRED:-$(command -v mscred || echo .venv/bin/mscred)}
HEADER="# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD), $(nvcc --version | tail -1)"
declare -A SOURCE=([forward]=conv_cell.cu [backward]=conv_cell_bwd.cu)
build() {  # build NAME SOURCE [FLAGS...]
  local name=$1 src=$2; shift 2
  nvcc "${FLAGS[@]}" "$@" -cubin "src/mscred/ops/conv_cell/$src" -o "$W/$name.cubin"
}
build forward_default conv_cell.cu
build backward_default conv_cell_bwd.cu
for spec in "${VARIANTS[@]}"; do
  variant=${spec%%:*}; flags=${spec#*:}; kernel=${variant%%_*}
  build "$variant" "${SOURCE[$kernel]}" $flags
  { echo "$HEADER"; echo "# $kernel: default build -> ${variant#*_} ($flags)"
    "$MSCRED" sass diff --loops --top 12 "$W/${kernel}_default.cubin" "$W/$variant.cubin"; } > "$D/$variant.txt"
done
rm -rf "$W"
head -8 "$D"/*.txt
