#!/usr/bin/env bash
# One device call: an A/B of a switch of the fused model on the training / inference benchmark.
#   bash benchmarks/gpu_train_ab.sh NAME ENVVAR [pytest args...]
# 1. (optional) the GPU tests given as pytest arguments (<= 150 s)
# 2. bench_train.py parts in one run (gpu_train_variants.sh): the eager baselines once, then the graphed fused
#    variants (bf16, fp32) each in its own process, with ENVVAR=0 (off) and ENVVAR=1 (on)
# Writes $OUT/NAME/{gpu_tests.txt, off.md, on.md, log.txt}.
set -uo pipefail
NAME=$1; VAR=$2; shift 2
. benchmarks/device_env.sh
D="$OUT/$NAME"; export D
mkdir -p "$D"
[ $# -gt 0 ] && bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 "$@"
bash benchmarks/gpu_train_variants.sh "$NAME" "off:g-fused-bf16+g-fused:$VAR=0" "on:g-fused-bf16+g-fused:$VAR=1"
