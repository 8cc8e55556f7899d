#!/usr/bin/env bash
# One device call (~5 min), the conv + cell step kernel's second round (the first, results/conv_cell_first/ and
# results/conv_cell/: one program a tile 0.90-0.94x of cuDNN + cell, persistent with the weight resident 0.57-0.67x):
#   1. bench_conv_cell.py: persistent programs without the resident weight, 2-4 an SM              -> conv_cell.md
#   2. Nsight Compute on one step of each path (cuDNN's convolution and the cell kernel; the step kernel at its
#      default tile): duration, throughput, occupancy, stall reasons                       -> ncu_cudnn.txt, ncu_kernel.txt
#   3. if a tile beats cuDNN + cell: the graphed bf16 step in alternation twice                        -> model/*.md
# Usage: bash benchmarks/gpu_conv_cell2.sh. Writes $OUT/conv_cell2.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell2)
bench_to_log "$D" 150 benchmarks/bench_conv_cell.py
grep -E "^\| (cudnn|[0-9])" "$D/conv_cell.md" | cut -c1-200; tail -2 "$D/bench_log.txt"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section LaunchStats --section SchedulerStats"
# the second call's step 1 (launches: per call and step one convolution and one cell kernel, or one step kernel)
timeout 120 ncu $S -k "regex:xmma_fprop|cell_fwd_kernel" --launch-skip 12 -c 2 \
  python3 benchmarks/bench_conv_cell.py --once cudnn > "$D/ncu_cudnn.txt" 2>&1; echo "ncu cudnn exit $?"
timeout 120 ncu $S -k regex:_conv_cell_kernel --launch-skip 6 -c 1 \
  python3 benchmarks/bench_conv_cell.py --once 128/8/2/0 > "$D/ncu_kernel.txt" 2>&1; echo "ncu kernel exit $?"
grep -hE "^  [a-z_]|Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occ|Registers Per|Warp Cycles Per Issued|No Eligible|Compute \(SM\) Th" \
  "$D/ncu_cudnn.txt" "$D/ncu_kernel.txt" | cut -c1-150
BEST=$(paste -sd, "$D/best_tile.env")
echo "fastest: ${BEST:-none}"
if [ -n "$BEST" ]; then
  OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
    "kernel_1:g-fused-bf16:$BEST" "default_2:g-fused-bf16" "kernel_2:g-fused-bf16:$BEST"
  grep -h "train fused + CUDA graph" "$D/model/log.txt"
fi
(cd "$OUT" && tar czf conv_cell2.tgz conv_cell2 && rm -rf conv_cell2)
