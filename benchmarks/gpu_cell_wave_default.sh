#!/usr/bin/env bash
# One device call (~9 min), 2026-12-02: the cell kernels' backward as one wave of 6 programs per SM by default
# (convlstm.WAVE_PER_SM, after results/cell_waves/) and both cell-kernel bias-gradient atomics relaxed (REDG, no
# fence) -- bench_cell_math.py --set waves (the grids before, 0/0, against the default and other counts), the
# fused ConvLSTM's grid-stride, SFU and full-size GPU tests, the graphed bf16 step in alternation (0/0 against the
# default, twice), then the whole-model GPU tests and bias_act's (whose bias atomics are relaxed too).
# Usage: bash benchmarks/gpu_cell_wave_default.sh. Writes $OUT/cell_wave_default.tgz and $OUT/train_tests_1202b.tgz.
set -uo pipefail
bash benchmarks/gpu_cell_call.sh cell_wave_default waves 170 200 \
  "grid_stride or wave_grid or sfu or unfenced or full_size_on_gpu or cuda_graph_capture" \
  "tiles_1:g-fused-bf16:MSCRED_CELL_WAVE=0/0" "default_1:g-fused-bf16" \
  "tiles_2:g-fused-bf16:MSCRED_CELL_WAVE=0/0" "default_2:g-fused-bf16"
bash benchmarks/gpu_pytest_call.sh train_tests_1202b 170 tests/test_ops_triton_train.py tests/test_train.py \
  tests/test_ops_triton_bias_act.py -k "graph or track or fifty or curve or full_size_on_gpu"
