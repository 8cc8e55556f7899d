#!/usr/bin/env bash
# One device call (~4-5 min): the conv + cell step kernel with its A operand read by the tensor cores from shared
# memory (MSCRED_CONV_CELL_SMEM_A=1: 128-byte-swizzle descriptors, no A fragments in registers; four or three
# warpgroups a block) against the default build (A by ldmatrix, three warpgroups). Second run: the descriptors'
# base offset 0 and (addr >> 7) % 8 (MSCRED_CONV_CELL_BASE_OFFSET; the first run, with the latter only, gave wrong
# gates, and its default build overran its shared memory: fixed); the tests with the default build.
#   0. the three builds at once (MSCRED_CONV_CELL_FLAGS), their logs in build_<n>.txt
#   1. the kernel's GPU tests with the default build                                                  -> gpu_tests.txt
#   2. bench_conv_cell.py: split path, default build and both variants at level 1 (level 2: split, default)
#                                                                                                   -> conv_cell.md
# Usage: bash benchmarks/gpu_conv_cell_smem.sh. Writes $OUT/conv_cell_smem.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_smem)
SMEM4="-DMSCRED_CONV_CELL_SMEM_A=1"
SMEM4BO="-DMSCRED_CONV_CELL_SMEM_A=1 -DMSCRED_CONV_CELL_BASE_OFFSET=1"
build_conv_cell "$D" "" "$SMEM4" "$SMEM4BO"
echo "builds done at ${SECONDS}s"; tail -n 3 "$D"/build_*.txt
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_conv_cell.py
grep -E "^(FAILED|ERROR)" "$D/gpu_tests.txt" | head -10 | cut -c1-300
bench_to_log "$D" 150 benchmarks/bench_conv_cell.py --variants "smem_a4=$SMEM4;smem_a4_base_offset=$SMEM4BO"
grep -E "^\| [12] " "$D/conv_cell.md" | cut -c1-240; grep -E "Error|error" "$D/bench_log.txt" | tail -5
(cd "$OUT" && tar czf conv_cell_smem.tgz conv_cell_smem && rm -rf conv_cell_smem)
