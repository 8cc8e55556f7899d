#!/usr/bin/env bash
# One device call (~2-3 min): Nsight Compute on the conv + cell step kernel at level 1 (default build, one step of
# the second call of bench_conv_cell.py --once kernel 1): duration, throughputs, occupancy, warp stall reasons, and
# the source counters' hottest SASS lines                                               -> ncu_kernel.txt, ncu_source.txt
# Usage: bash benchmarks/gpu_conv_cell_ncu.sh. Writes $OUT/conv_cell_ncu.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_ncu)
python3 -c "from mscred.ops import conv_cell; conv_cell._extension()" > "$D/build.txt" 2>&1
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis"
timeout 150 ncu $S -k regex:conv_cell_kernel --launch-skip 6 -c 1 \
  python3 benchmarks/bench_conv_cell.py --once kernel 1 > "$D/ncu_kernel.txt" 2>&1; echo "ncu exit $?"
grep -hE "Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|L2 Cache Throughput|Achieved Occupancy|Theoretical Occ|Registers Per|Warp Cycles Per Issued|No Eligible|Issued Warp|Compute \(SM\) Th|Stall|stall|Executed Ipc|est. speedup|Tensor" \
  "$D/ncu_kernel.txt" | cut -c1-160 | head -60
timeout 150 ncu --section SourceCounters --section WarpStateStats --print-details all -k regex:conv_cell_kernel \
  --launch-skip 6 -c 1 python3 benchmarks/bench_conv_cell.py --once kernel 1 > "$D/ncu_source.txt" 2>&1
echo "ncu source exit $?"; grep -iE "stall|warp state" "$D/ncu_source.txt" | head -30 | cut -c1-180
(cd "$OUT" && tar czf conv_cell_ncu.tgz conv_cell_ncu && rm -rf conv_cell_ncu)
