#!/usr/bin/env bash
# One device call (~4 min): why did a chain data gradient wait 75 us beside level 1's weight gradient with 22 SMs
# free (results/graph_timeline_fold/, docs/training-kernel-plan.md)? Nsight Compute's launch statistics and
# occupancy (cluster size, shared memory, registers, blocks an SM) of the graphed step's cuDNN kernels, as the
# graph launches them (step_replays.py: one replay inside the NVTX range "replays", each kernel node profiled).
# Writes $OUT/NAME/ncu.txt and a summary, packed as $OUT/NAME.tgz.
#   bash benchmarks/gpu_step_launch_stats.sh [NAME]
set -uo pipefail
NAME=${1:-step_launch_stats}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 400 ncu --nvtx --nvtx-include "replays/" --graph-profiling node -k "regex:xmma|cutlass|nvjet" \
  --section LaunchStats --section Occupancy python3 benchmarks/step_replays.py --replays 1 > "$D/ncu.txt" 2>&1
echo "ncu exit $? at ${SECONDS}s"
FIELDS="Cluster Size|Shared Memory Configuration Size|Dynamic Shared Memory Per Block|Static Shared"
FIELDS="$FIELDS|Registers Per Thread|Block Limit|Grid Size|Block Size|Theoretical Occupancy"
grep -E "^  [a-zA-Z_].*\(|$FIELDS" "$D/ncu.txt" > "$D/summary.txt"
head -40 "$D/summary.txt"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
