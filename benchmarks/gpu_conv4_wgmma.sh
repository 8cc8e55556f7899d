#!/usr/bin/env bash
# One device call (~1-2 min): conv4's wgmma kernel (conv_patch_wgmma, patch_wgmma.cuh) in the harness in its tiles
# beside the mma.sync kernel (conv_patch), then where one tile's warps wait: Nsight Compute's warp-state section and its source
# page (per SASS instruction: executed instructions and stall samples, CSV) at batch 640 and at batch 1.
# Writes $OUT/conv4_wgmma/{probe.txt,ncu_<batch>.txt,source_<batch>.csv}.
# Usage (repository root, CUDA machine; carry build/conv_harness, built on the CPU box with
#   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo -o build/conv_harness \
#   benchmarks/conv_harness.cu):
#   ROWS=R245_10_4_1,T1_128_3_3 PROFILE=T1_128_3_3 bash benchmarks/gpu_conv4_wgmma.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/conv4_wgmma"; mkdir -p "$D"
BIN=build/conv_harness
ROWS=${ROWS:-R245_10_4_1,T1_128_3_3}
PROFILE=${PROFILE:-T1_128_3_3}
KERNEL=${KERNEL:-conv_patch_wgmma}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  for b in 640 1 7 643; do
    timeout 60 "$BIN" --iters $([ $b = 640 ] && echo 30 || echo 5) --batch $b --only conv4 --variants "$ROWS"
  done
  timeout 60 "$BIN" --iters 5 --batch 64 --n 16 --only conv3 --variants "$ROWS"  # 8 x 8 -> 4 x 4 with C = 64, O = 128
} > "$D/probe.txt" 2>&1
grep -E "^conv|device" "$D/probe.txt"
[ -n "$PROFILE" ] || exit 0
for b in 640 1; do
  timeout 120 ncu --section WarpStateStats --section SpeedOfLight --section SchedulerStats -k "regex:$KERNEL" -c 1 \
    "$BIN" --iters 1 --batch $b --only conv4 --variants "$PROFILE" > "$D/ncu_$b.txt" 2>&1
  timeout 120 ncu --section SourceCounters -k "regex:$KERNEL" -c 1 --page source --print-source sass --csv \
    "$BIN" --iters 1 --batch $b --only conv4 --variants "$PROFILE" > "$D/source_$b.csv" 2> "$D/source_$b.err"
  echo "batch $b: ncu exit code $? ($(wc -l < "$D/source_$b.csv") csv lines)"
  grep -E "Duration|Stall|Warp Cycles Per Issued" "$D/ncu_$b.txt" | head -20
done
