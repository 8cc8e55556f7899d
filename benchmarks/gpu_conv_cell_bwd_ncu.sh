#!/usr/bin/env bash
# One device call (~2-3 min): Nsight Compute on the backward step kernel at level 1 (default build; the second of the
# four step launches of bench_conv_cell_bwd.py's first eager call with the kernel): duration, throughputs, occupancy,
# warp stall reasons, and the source counters' hottest SASS lines              -> ncu_kernel.txt, ncu_source.txt
# Usage: bash benchmarks/gpu_conv_cell_bwd_ncu.sh. Writes $OUT/conv_cell_bwd_ncu.tgz. It profiles the DEFAULT build
# only: bench_conv_cell_bwd.py sets MSCRED_CONV_CELL_FLAGS to "" for its default rows, which the second launch belongs
# to (results/conv_cell_bwd_ncu_rows/ learned it so); to profile an A/B build, make it the default in the working tree.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_bwd_ncu)
python3 -c "from mscred.ops import conv_cell; conv_cell._extension()" > "$D/build.txt" 2>&1 &
python3 -c "from mscred.ops import conv_cell; conv_cell._backward()" > "$D/build_backward.txt" 2>&1 &
wait
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats"
timeout 150 ncu $S -k regex:conv_cell_bwd_kernel --launch-skip 1 -c 1 \
  python3 benchmarks/bench_conv_cell_bwd.py --out /tmp/bwd_ncu > "$D/ncu_kernel.txt" 2>&1; echo "ncu exit $?"
grep -hE "Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|L2 Cache Throughput|Achieved Occupancy|Theoretical Occ|Registers Per|Warp Cycles Per Issued|No Eligible|Issued Warp|Compute \(SM\) Th|Stall|stall|Executed Ipc|est. speedup|Executed Instructions  " \
  "$D/ncu_kernel.txt" | cut -c1-160 | head -60
timeout 150 ncu --section SourceCounters --section WarpStateStats --print-details all -k regex:conv_cell_bwd_kernel \
  --launch-skip 1 -c 1 python3 benchmarks/bench_conv_cell_bwd.py --out /tmp/bwd_ncu > "$D/ncu_source.txt" 2>&1
echo "ncu source exit $?"; grep -iE "stall|warp state" "$D/ncu_source.txt" | head -30 | cut -c1-180
(cd "$OUT" && tar czf conv_cell_bwd_ncu.tgz conv_cell_bwd_ncu && rm -rf conv_cell_bwd_ncu)
