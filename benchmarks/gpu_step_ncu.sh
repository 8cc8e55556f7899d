#!/usr/bin/env bash
# One device call (~3 min): Nsight Compute on level 1 (32 channels, 30 x 30, batch 128, bf16) of the training
# ConvLSTM: the step kernels (convlstm_step, a step t >= 1 each way) against the per-step path's cell kernels
# (MSCRED_STEP_GEMM=0). Sections: SpeedOfLight, MemoryWorkloadAnalysis, Occupancy, LaunchStats, WarpStateStats.
# Writes $OUT/step_ncu/ncu_<kernel>.txt.
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/step_ncu"; mkdir -p "$D"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
P="python3 benchmarks/profile_train_level.py 32 30"
# Launch 12 of 15 (three calls of 5 steps): the third call's step t = 3 forward / t = 3 backward (newest first: t = 1).
for k in step_fwd_kernel step_bwd_kernel; do
  timeout 150 ncu $S -k regex:$k --launch-skip 12 -c 1 $P > "$D/ncu_$k.txt" 2>&1; echo "$k: ncu exit $?"
done
for k in cell_fwd_kernel cell_bwd_kernel; do
  MSCRED_STEP_GEMM=0 timeout 150 ncu $S -k regex:$k --launch-skip 12 -c 1 $P > "$D/ncu_$k.txt" 2>&1
  echo "$k: ncu exit $?"
done
for f in "$D"/ncu_*.txt; do echo "== $f"; grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|Achieved Occupancy|Registers Per|Theoretical Occupancy|Block Limit Reg|Stall|One or More Eligible|Issued Warp" "$f" | head -16; done
