#!/usr/bin/env bash
# One device call (~2 min): the ConvLSTM weight gradients as four cuBLAS GEMMs over shifted rows against cuDNN, per
# call of the training step (benchmarks/bench_wgrad_gemm.py; the identity is checked in float64 first). If the GEMMs
# win, the product path needs the backward cell kernel to write its gate gradients into a bordered buffer
# (docs/training-kernel-plan.md, "The gap by kernel group").
# Usage: bash benchmarks/gpu_wgrad_gemm.sh. Writes $OUT/wgrad_gemm.tgz.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir wgrad_gemm)
bench_to_log "$D" 150 benchmarks/bench_wgrad_gemm.py
tail -25 "$D/bench_log.txt"
(cd "$OUT" && tar czf wgrad_gemm.tgz wgrad_gemm && rm -rf wgrad_gemm)
