#!/usr/bin/env bash
# One device call (~3 min): (1) probe_conv_triton.py, the four encoder layers as Triton TF32 implicit GEMMs against
# cuDNN + SELU and our CUDA op, graph-timed at batch 640 -> $OUT/conv_triton/{conv_triton.md,json,log.txt};
# (2) Nsight Compute's instruction mix and warp stalls of the product's conv1 kernel (conv_pipelined) in the
# harness (build/conv_harness, built here or carried) -> $OUT/conv_triton/ncu_conv1_mix.txt.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_conv_triton.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/conv_triton"; mkdir -p "$D"
cache_bytecode
{
  bash benchmarks/machine_info.sh
  timeout 300 python3 benchmarks/probe_conv_triton.py --out "$D"
  echo "probe_conv_triton exit $?"
} > "$D/log.txt" 2>&1
grep -E "^\|" "$D/log.txt" | tail -40
BIN=build/conv_harness
[ -x "$BIN" ] || { mkdir -p build && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo -o "$BIN" benchmarks/conv_harness.cu; }
timeout 150 ncu --section InstructionStats --section WarpStateStats --section SchedulerStats -k regex:conv_pipelined \
  --print-details all "$BIN" --iters 1 --only conv1 --variants pipe > "$D/ncu_conv1_mix.txt" 2>&1
echo "ncu exit code $?"
grep -iE "stall|Executed Instructions|Issued Warp" "$D/ncu_conv1_mix.txt" | head -30
