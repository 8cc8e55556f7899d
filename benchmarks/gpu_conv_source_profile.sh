#!/usr/bin/env bash
# One device call (~2-3 min): where the encoder kernels' executed instructions go, per source line. Nsight Compute's
# source counters on the harness (build/conv_harness, -lineinfo; carried or built here) for the product kernels of
# conv1 and conv2 (conv_pipelined) and conv4 (conv_patch) at batch 640: per CUDA line and per SASS instruction,
# executed warp instructions and stall samples, as CSV. Three kernel ideas for conv1 ended at the generic kernel's
# ~22M instructions (docs/kernel-experiments.md) without a per-line count; this is that count.
# Writes $OUT/conv_source/{conv1,conv2,conv4}.csv and .txt (ncu's own errors in the .txt).
# Usage (repository root, CUDA machine; carry build/conv_harness): bash benchmarks/gpu_conv_source_profile.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/conv_source"; mkdir -p "$D"
BIN=build/conv_harness
[ -x "$BIN" ] || { mkdir -p build && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo -o "$BIN" benchmarks/conv_harness.cu; }
for spec in conv1:conv_pipelined conv2:conv_pipelined conv4:conv_patch; do
  layer=${spec%%:*} kernel=${spec#*:}
  timeout 120 ncu --section SourceCounters --section InstructionStats -k "regex:$kernel" -c 1 \
    --page source --print-source cuda,sass --csv "$BIN" --iters 1 --only "$layer" --variants pipe \
    > "$D/$layer.csv" 2> "$D/$layer.txt"
  rc=$?
  echo "$layer ($kernel) ncu source page exit code $rc ($(wc -l < "$D/$layer.csv") csv lines)"
  if [ $rc -ne 0 ]; then  # an ncu without the source page: the sections' own text (top stall locations)
    timeout 120 ncu --section SourceCounters --section InstructionStats -k "regex:$kernel" -c 1 \
      "$BIN" --iters 1 --only "$layer" --variants pipe >> "$D/$layer.txt" 2>&1
    echo "$layer fallback (sections as text) exit code $?"
  fi
done
