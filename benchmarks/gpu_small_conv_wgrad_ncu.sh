#!/usr/bin/env bash
# One device call (~3 min): conv1's weight-gradient call of the training step alone (small_conv_wgrad_alone.py),
# in the working tree and in an older one (OLD_SRC, default build/old_tree/src, carried), each then under Nsight
# Compute: its last launch of _small_conv_wgrad_kernel inside the NVTX range "measured", with occupancy, launch,
# warp-state (stall reasons), scheduler and memory sections. Writes $OUT/NAME/times_{old,new}.txt, ncu_{old,new}.txt.
#   bash benchmarks/gpu_small_conv_wgrad_ncu.sh [NAME]
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir "${1:-small_conv_wgrad_ncu}")
OLD_SRC=${OLD_SRC:-build/old_tree/src}
for v in old new; do  # both trees' extensions built at once (an untimed run each)
  src=src; [ "$v" = old ] && src=$OLD_SRC
  TORCH_EXTENSIONS_DIR=/tmp/ext_$v PYTHONPATH=$src timeout 300 python3 benchmarks/small_conv_wgrad_alone.py \
    > "$D/warm_$v.txt" 2>&1 &
done
wait; echo "builds done at ${SECONDS}s"; rm -f "$D"/warm_*.txt
for v in old new; do
  src=src; [ "$v" = old ] && src=$OLD_SRC
  TORCH_EXTENSIONS_DIR=/tmp/ext_$v PYTHONPATH=$src timeout 200 python3 benchmarks/small_conv_wgrad_alone.py \
    > "$D/times_$v.txt" 2>&1
  echo "times $v exit $? at ${SECONDS}s"; tail -2 "$D/times_$v.txt"
  TORCH_EXTENSIONS_DIR=/tmp/ext_$v PYTHONPATH=$src timeout 240 ncu --nvtx --nvtx-include "measured/" \
    -k regex:_small_conv_wgrad_kernel -s 2 -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 benchmarks/small_conv_wgrad_alone.py > "$D/ncu_$v.txt" 2>&1
  echo "ncu $v exit $? at ${SECONDS}s"
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit Reg|Stall|Issued Warp|No Eligible|Warp Cycles Per Issued" "$D/ncu_$v.txt" | head -24
done
