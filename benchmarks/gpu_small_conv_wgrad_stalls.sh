#!/usr/bin/env bash
# One device call (~2.5 min): where conv1's weight-gradient kernel (the working tree's) waits, instruction by
# instruction. small_conv_wgrad_alone.py once (builds, times the op), then under Nsight Compute with warp-state
# sampling (WarpStateStats, SourceCounters) on its last launch in the NVTX range "measured", the report then printed
# as the SASS source page (each instruction with its stall samples, CSV). Writes $OUT/NAME/times.txt, ncu.txt and
# sass_stalls.csv.gz.
#   bash benchmarks/gpu_small_conv_wgrad_stalls.sh [NAME]
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir "${1:-small_conv_wgrad_stalls}")
timeout 240 python3 benchmarks/small_conv_wgrad_alone.py > "$D/times.txt" 2>&1
echo "times exit $? at ${SECONDS}s"; tail -1 "$D/times.txt"
timeout 200 ncu --nvtx --nvtx-include "measured/" -k regex:_small_conv_wgrad_kernel -s 2 -c 1 \
  --section WarpStateStats --section SourceCounters --section SchedulerStats -o /tmp/stalls \
  python3 benchmarks/small_conv_wgrad_alone.py > "$D/ncu_log.txt" 2>&1
echo "ncu exit $? at ${SECONDS}s"
ncu -i /tmp/stalls.ncu-rep --print-details all > "$D/ncu.txt" 2>&1
ncu -i /tmp/stalls.ncu-rep --page source --csv --print-source sass 2> "$D/source_err.txt" | gzip > "$D/sass_stalls.csv.gz"
echo "source page exit $? at ${SECONDS}s"; ls -la "$D"
grep -E "Stall|Warp Cycles Per Issued|Issued Warp" "$D/ncu.txt" | head -30
