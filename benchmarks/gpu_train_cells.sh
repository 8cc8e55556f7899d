#!/usr/bin/env bash
# One device call (~7 min): the training path's cell kernels, and the whole step after the copy changes.
#   1. bench_train_cells.py: per level, forward and backward as CUDA-graph replays, BLOCK x warps x cell storage
#                                                                                     -> train_cells.{md,json}
#   2. profile_train_step.py: the step's kernels by op and in launch order, graphed  -> train_step_profile.txt
#   3. the whole model (graphed bf16 step, gpu_train_variants.sh): default, float32 cells, default   -> model/
#   4. GPU tests of the changed code                                                  -> gpu_tests.txt
# Usage: NAME=<result folder> bash benchmarks/gpu_train_cells.sh. Writes $OUT/$NAME.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=${NAME:-train_cells}
D=$(result_dir "$NAME")
bench_to_log "$D/sweep" 150 benchmarks/bench_train_cells.py
grep -E "^\| (32|64|128|256), " "$D/sweep/train_cells.md" | sort -t'|' -k9 -r | head -12
bench_to_log "$D" 100 benchmarks/profile_train_step.py
grep "^## " "$D/train_step_profile.txt"
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
  "cells32_1:g-fused-bf16:MSCRED_LSTM_HALF_CELL_TRAIN=0" "default_2:g-fused-bf16"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 170 tests/test_padding.py tests/test_model.py \
  tests/test_ops_triton_convlstm.py -k "not float64_equals and not window"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
