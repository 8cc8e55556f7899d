#!/usr/bin/env bash
# One device call: time every tile configuration of the implicit-GEMM forward on the four encoder layers with the
# standalone harness (benchmarks/conv_harness.cu, built here or carried as build/conv_harness), then profile the
# product's kernel choice per layer with Nsight Compute (throughput, memory traffic, stall reasons). Writes
# $OUT/conv_probe/{probe.txt,ncu_pipe.txt}. ~1-2 minutes.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_conv_probe.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
D="$OUT/conv_probe"
mkdir -p "$D"
BIN=build/conv_harness
[ -x "$BIN" ] || { mkdir -p build && nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -o "$BIN" benchmarks/conv_harness.cu; }
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  timeout 120 "$BIN" --iters 30
  echo "harness exit code $?"
  # A previous build carried beside it (build/conv_harness_v0), timed in the same run for an A/B comparison.
  if [ -x build/conv_harness_v0 ]; then
    echo "## previous kernel (build/conv_harness_v0)"
    timeout 120 build/conv_harness_v0 --iters 30
    echo "harness v0 exit code $?"
  fi
} > "$D/probe.txt" 2>&1
cat "$D/probe.txt"
# The product's choice per layer ("pipe"): one checked launch + one timed launch per layer -> 8 kernels.
timeout 240 ncu --clock-control none -k regex:conv_pipelined \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section SchedulerStats --section LaunchStats \
  --metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum \
  "$BIN" --iters 1 --variant pipe > "$D/ncu_pipe.txt" 2>&1
echo "ncu exit code $?" >> "$D/ncu_pipe.txt"
grep -E "conv_pipelined|Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Achieved Occupancy|Registers Per|lts__t_sectors_srcunit_tex_op_read|dram__bytes|Warp Cycles Per Issued|No Eligible|exit code" "$D/ncu_pipe.txt" | head -150
