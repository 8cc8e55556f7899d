#!/usr/bin/env bash
# One device call (~2-3 min): the conv + cell step kernel's level-1 builds against the default (A by ldmatrix, three
# warpgroups, 2 row buffers each): 3 row buffers (MSCRED_CONV_CELL_STAGES=3); the A operand from shared memory with
# three warpgroups (no A registers: no spills at 168 registers), with 2 and 3 row buffers.
#   0. the builds at once (MSCRED_CONV_CELL_FLAGS), their logs in build_<n>.txt
#   1. bench_conv_cell.py: split path, default build and the variants at level 1 (outputs against the split path's)
#                                                                                                   -> conv_cell.md
# Usage: bash benchmarks/gpu_conv_cell_stages.sh. Writes $OUT/conv_cell_stages.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_stages)
V1="-DMSCRED_CONV_CELL_STAGES=3"
V2="-DMSCRED_CONV_CELL_SMEM_A=1 -DMSCRED_CONV_CELL_WARPGROUPS=3"
V3="-DMSCRED_CONV_CELL_SMEM_A=1 -DMSCRED_CONV_CELL_WARPGROUPS=3 -DMSCRED_CONV_CELL_STAGES=3"
build_conv_cell "$D" "" "$V1" "$V2" "$V3"
echo "builds done at ${SECONDS}s"
bench_to_log "$D" 200 benchmarks/bench_conv_cell.py --variants "stages3=$V1;smem_a3=$V2;smem_a3_stages3=$V3"
grep -E "^\| [12] " "$D/conv_cell.md" | cut -c1-200; grep -E "Error|error" "$D/bench_log.txt" | tail -5
(cd "$OUT" && tar czf conv_cell_stages.tgz conv_cell_stages && rm -rf conv_cell_stages)
