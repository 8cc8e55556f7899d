#!/usr/bin/env bash
# One device call (~2.5 min cold): conv1's CUDA weight-gradient kernel (ops/small_conv_wgrad) -- its GPU tests
# (float64 oracle beside the Triton kernel, graph replay), then bench_conv1_wgrad_cuda.py (the step's call, CUDA
# against Triton in alternation). Writes $OUT/NAME/gpu_tests.txt, bench_log.txt, conv1_wgrad_cuda.{md,json}.
#   bash benchmarks/gpu_conv1_wgrad_cuda.sh [NAME]
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir "${1:-conv1_wgrad_cuda}")
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_small_conv_wgrad_cuda.py > "$D/gpu_tests.txt" 2>&1
echo "tests exit $? at ${SECONDS}s"; tail -5 "$D/gpu_tests.txt"
timeout 120 python3 benchmarks/bench_conv1_wgrad_cuda.py --out "$D" --rounds 3 --blocks "${BLOCKS:-0}" > "$D/bench_log.txt" 2>&1
echo "bench exit $? at ${SECONDS}s"; tail -12 "$D/bench_log.txt"
