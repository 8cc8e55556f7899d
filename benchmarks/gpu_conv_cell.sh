#!/usr/bin/env bash
# One device call (~7 min): level 1's training forward as one conv + cell kernel a step (ops/triton/
# convlstm_conv_cell.py, MSCRED_LSTM_CONV_CELL=1), operands by TMA.
#   1. bench_conv_cell.py: the forward call, cuDNN + cell kernel against the step kernel's tiles      -> conv_cell.md
#   2. the step kernel's GPU tests (full-size bf16 level 1 against the oracle and cuDNN's path), and the
#      concatenated path's tests                                                                    -> gpu_tests.txt
#   3. the graphed bf16 step, the default against the fastest tile, in alternation twice             -> model/*.md
# Usage: bash benchmarks/gpu_conv_cell.sh. Writes $OUT/conv_cell.tgz. (Step 3 only if a tile beats the default path.)
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell)
bench_to_log "$D" 150 benchmarks/bench_conv_cell.py
grep -E "^\| (cudnn|[0-9])" "$D/conv_cell.md"; tail -3 "$D/bench_log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_ops_triton_conv_cell.py \
  tests/test_ops_triton_convlstm.py -k "conv_cell or concatenated"
BEST=$(paste -sd, "$D/best_tile.env")
echo "fastest: ${BEST:-none}"
if [ -n "$BEST" ]; then
  OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
    "kernel_1:g-fused-bf16:$BEST" "default_2:g-fused-bf16" "kernel_2:g-fused-bf16:$BEST"
  grep -h "train fused + CUDA graph" "$D/model/log.txt"
fi
(cd "$OUT" && tar czf conv_cell.tgz conv_cell && rm -rf conv_cell)
