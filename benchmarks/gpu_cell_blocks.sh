#!/usr/bin/env bash
# One device call (~5 min): the forward cell kernel's tile sweep on the scoring path (bench_cell_blocks.py), then the
# GPU tests of the ops the inference changes of 2026-11-30 touch (half-precision cell state, sub-pixel deconv2).
# Writes $OUT/cell_blocks/{cell_blocks.md,cell_blocks.json,bench_log.txt,gpu_tests.txt}.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_cell_blocks.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/cell_blocks"
bench_to_log "$D" 150 benchmarks/bench_cell_blocks.py
tail -40 "$D/bench_log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 330 tests/test_subpixel.py tests/test_ops_triton_convlstm.py \
  tests/test_ops_triton_bias_act.py tests/test_forward_windows.py
