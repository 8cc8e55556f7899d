#!/usr/bin/env bash
# One device call (~2 min): level 1's weight gradient alone (benchmarks/level1_wgrad.py: times and bytes), then the
# same under Nsight Compute, the kernels of its NVTX range "measured" (the first two launches: the 64-channel call's
# workspace initialisation and its main kernel), SpeedOfLight and MemoryWorkloadAnalysis. Writes $OUT/NAME/times.md
# and ncu.txt.
#   bash benchmarks/gpu_level1_wgrad_ncu.sh [NAME]
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir "${1:-level1_wgrad}")
timeout 120 python3 benchmarks/level1_wgrad.py > "$D/times.md" 2>&1; echo "times exit $?"; cat "$D/times.md"
timeout 240 ncu --nvtx --nvtx-include "measured/" -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  python3 benchmarks/level1_wgrad.py > "$D/ncu.txt" 2>&1
echo "ncu exit $?"
grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit|Mem Busy" "$D/ncu.txt" | head -30
