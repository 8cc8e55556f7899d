#!/usr/bin/env bash
# One device call (~3 min): where the training cell kernels' time goes, by Nsight Compute, levels 1 and 3 (batch 128,
# bf16): cell_bwd_kernel (which takes 1.5-2.2x the forward's time for the same bytes per element) and
# cell_fwd_kernel, one launch each (the third call's step t = 2 of 5). Sections: SpeedOfLight,
# MemoryWorkloadAnalysis, Occupancy, LaunchStats, WarpStateStats, SourceCounters (the stall reasons by source line).
# Writes $OUT/cell_ncu/ncu_<kernel>_<channels>.txt.
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/cell_ncu"; mkdir -p "$D"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
S="$S --section WarpStateStats --section SourceCounters --import-source yes"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
for level in "32 30" "128 8"; do
  ch=${level% *}
  for k in cell_bwd_kernel cell_fwd_kernel; do
    timeout 150 ncu $S -k regex:$k --launch-skip 12 -c 1 python3 benchmarks/profile_train_level.py $level \
      > "$D/ncu_${k}_$ch.txt" 2>&1
    echo "$k $ch: ncu exit $?"
  done
done
for f in "$D"/ncu_*.txt; do echo "== $f"; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" "$f" | head -6; done
