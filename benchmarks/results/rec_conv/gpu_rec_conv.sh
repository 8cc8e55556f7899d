#!/usr/bin/env bash
# One device call (~4 min): the ConvLSTM's recurrent convolutions, forward and data gradient, cuDNN (heuristics
# and autotuned) against the Triton gather GEMM (ops/triton/rec_conv.py) over a tile sweep, at the training batch
# (128) and the scoring batch (3,591), each checked against float64. Writes $OUT/rec_conv/{rec_conv.md,json,log.txt}.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_rec_conv.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
D="$OUT/rec_conv"; mkdir -p "$D"
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/mscred_pycache
{
  bash benchmarks/machine_info.sh
  timeout 500 python3 benchmarks/bench_rec_conv.py --out "$D"
  echo "bench_rec_conv exit code $?"
} > "$D/log.txt" 2>&1
tail -40 "$D/log.txt"
