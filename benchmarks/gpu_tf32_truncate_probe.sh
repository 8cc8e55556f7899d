#!/usr/bin/env bash
# One device call (~1 min): does skipping the TF32 rounding instruction pay? The product's implicit-GEMM kernels
# round every fragment to TF32 (one cvt.rn per value, per warp that reads it); built with -DMSCRED_TF32_TRUNCATE
# they hand the raw fp32 bits to the tensor core, which then truncates them. Both harness builds
# (benchmarks/conv_harness.cu: build/conv_harness and build/conv_harness_trunc, built on the CPU box and carried)
# time the product's choice per layer ("pipe") and conv4's 5-stage patch tile, alternating twice in one run; the
# harness prints each row's error against a direct float32 convolution, so the accuracy cost shows beside the time.
# Writes $OUT/tf32_truncate/probe.txt. Usage: bash benchmarks/gpu_tf32_truncate_probe.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/tf32_truncate"; mkdir -p "$D"
for flags in "" "-DMSCRED_TF32_TRUNCATE"; do
  bin=build/conv_harness${flags:+_trunc}
  [ -x "$bin" ] || { mkdir -p build && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo $flags -o "$bin" benchmarks/conv_harness.cu; }
done
{
  bash benchmarks/machine_info.sh
  for pass in 1 2; do
    for bin in build/conv_harness build/conv_harness_trunc; do
      echo "## pass $pass: $bin"
      for layer in conv1 conv2 conv3 conv4; do
        rows=pipe; [ $layer = conv4 ] && rows=pipe,R245_10_5_1
        timeout 30 "$bin" --iters 30 --batch 640 --only $layer --variants $rows
      done
    done
  done
} > "$D/probe.txt" 2>&1
grep -E "^##|^conv" "$D/probe.txt"
