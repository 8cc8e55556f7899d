#!/usr/bin/env bash
# One device call: time kernel variants and tile configurations of the implicit-GEMM forward on the four encoder
# layers with the standalone harness (benchmarks/conv_harness.cu, built here or carried as build/conv_harness),
# beside the previous build (build/conv_harness_v0, if carried) in the same run; check the variants at awkward batch
# sizes (image and row tails); then profile chosen kernels with Nsight Compute (throughput, memory traffic, stall
# reasons). Writes $OUT/conv_probe/{probe.txt,ncu.txt}. ~1-2 minutes.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_conv_probe.sh, with optionally
#   SPEC="conv1:pipe,rows conv4:pipe,R425_5_3_2"  per layer, the harness rows to time, each layer in a process of its
#                            own (a device fault is sticky for its process); default: every row on every layer
#   TAIL_BATCHES="7 643"     batch sizes at which the same rows are checked once more (2 timed launches each)
#   TAIL_N="16 55"           image sizes at which they are checked too (batch 64)
#   V0_ROWS=pipe V0_LAYER=   the previous build's rows (and layer) timed beside this build's
#   NCU_VARIANTS=pipe        harness rows to profile (empty: none), NCU_KERNELS=conv_pipelined the kernel-name regex
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/conv_probe"
mkdir -p "$D"
BIN=build/conv_harness
SPEC=${SPEC:-"conv1: conv2: conv3: conv4:"}
NCU_VARIANTS=${NCU_VARIANTS-pipe}
NCU_KERNELS=${NCU_KERNELS:-conv_pipelined}
[ -x "$BIN" ] || { mkdir -p build && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo -o "$BIN" benchmarks/conv_harness.cu; }
harness() {  # harness binary, batch, iters[, n]: every layer of SPEC
  for item in $SPEC; do
    layer=${item%%:*} rows=${item#*:}
    timeout 30 "$1" --iters "$3" --batch "$2" ${4:+--n "$4"} --only "$layer" ${rows:+--variants "$rows"}
    echo "harness $layer exit code $?"
  done
}
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  harness "$BIN" 640 30
  # The previous build (the product's kernels before this change), timed in the same run for an A/B comparison.
  if [ -x build/conv_harness_v0 ]; then
    echo "## previous kernel (build/conv_harness_v0)"
    timeout 30 build/conv_harness_v0 --iters 30 ${V0_LAYER:+--only "$V0_LAYER"} --variants "${V0_ROWS:-pipe}"
    echo "harness v0 exit code $?"
    echo "## this build again (run-to-run spread)"
    harness "$BIN" 640 30
  fi
  for b in ${TAIL_BATCHES:-}; do
    echo "## batch $b (tails)"
    harness "$BIN" "$b" 2
  done
  for n in ${TAIL_N:-}; do  # other image sizes (kernels with the n = 30 geometry compiled in take another path)
    echo "## n = $n, batch 64"
    harness "$BIN" 64 2 "$n"
  done
} > "$D/probe.txt" 2>&1
grep -v -E "^conv[1-4] +[pP][0-9]" "$D/probe.txt"  # the summary (the full sweep stays in the file)
[ -n "$NCU_VARIANTS" ] || exit 0  # NCU_VARIANTS= (empty): no profile
timeout 45 ncu --clock-control none -k regex:"$NCU_KERNELS" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section SchedulerStats --section LaunchStats \
  --metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum \
  "$BIN" --iters 1 --variants "$NCU_VARIANTS" > "$D/ncu.txt" 2>&1
echo "ncu exit code $?" >> "$D/ncu.txt"
grep -E "  void |Duration|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|Registers Per|smsp__inst_executed|dram__bytes|lts__t_sectors_srcunit_tex_op_read|Warp Cycles Per Issued|No Eligible|exit code" "$D/ncu.txt" | sed 's/(const float.*//' | head -60
