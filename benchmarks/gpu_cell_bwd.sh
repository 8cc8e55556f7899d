#!/usr/bin/env bash
# One device call (~6 min): the training backward of each ConvLSTM level and its cell kernel's variants.
#   1. bench_cell_bwd.py --step: per level (batch 128, bf16) the backward's kernels, the whole level backward with
#      the bias gradient as per-program partial sums (default) or atomic adds, BLOCK 1024/2048, warps 4/8; one
#      fused training step's ops with their shapes                                   -> cell_bwd.{md,json}, step_ops.txt
#   2. the whole model (graphed bf16 step, gpu_train_variants.sh): partials, atomics, partials   -> model/
#   3. GPU tests of the fused ConvLSTM's training path (selected)                     -> gpu_tests.txt
# Writes $OUT/cell_bwd.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir cell_bwd)
bench_to_log "$D" 200 benchmarks/bench_cell_bwd.py --step
grep -E "^\| (32|64|128|256), " "$D/cell_bwd.md" | head -40
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "partials_1:g-fused-bf16" \
  "atomics_1:g-fused-bf16:MSCRED_LSTM_BIAS_PARTIALS=0" "partials_2:g-fused-bf16"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py \
  -k "bias_gradient or float64_equals or channels_last or full_size or graph or opcheck or autocast or short"
(cd "$OUT" && tar czf cell_bwd.tgz cell_bwd && rm -rf cell_bwd)
