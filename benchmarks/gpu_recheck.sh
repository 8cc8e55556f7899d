#!/usr/bin/env bash
# Short device call after refactors of GPU code: the harness's product kernels (output checked against a direct
# convolution), the implicit-pipe CUDA tests of the im2col op, and the Triton ops' full-size / graph / autocast GPU
# tests. Writes $OUT/gpu_recheck.txt. ~2-3 minutes.
set -uo pipefail
. benchmarks/device_env.sh
mkdir -p "$OUT"
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  [ -x build/conv_harness ] || nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo -o build/conv_harness benchmarks/conv_harness.cu
  timeout 60 build/conv_harness --iters 10 --variant pipe; echo "harness exit code $?"
  timeout 150 python3 -m pytest -q -p no:cacheprovider -rs tests/test_ops_triton_attention.py \
    tests/test_ops_triton_convlstm.py tests/test_ops_triton_bias_act.py -k "full_size or graph or autocast or cuda" 2>&1
  echo "pytest (Triton ops) exit code $?"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_ops_im2col.py -k "cuda and implicit-pipe" 2>&1
  echo "pytest (im2col implicit-pipe on CUDA) exit code $?"
} > "$OUT/gpu_recheck.txt" 2>&1
tail -12 "$OUT/gpu_recheck.txt"
