#!/usr/bin/env bash
# One device call (~5-6 min): the conv + cell step kernel as adopted (A operand from shared memory, level 1) in the
# graphed bf16 training step against the split path (MSCRED_LSTM_CONV_CELL=0), in alternation twice
# (gpu_train_variants.sh, each part cut at 45 s)                                                    -> model/*.md
# then, with the defaults, the training, kernel, ConvLSTM-op and env tests                          -> gpu_tests.txt
# Usage: bash benchmarks/gpu_conv_cell_final.sh. Writes $OUT/conv_cell_final.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_final)
timeout 240 python3 -c "from mscred.ops import conv_cell; conv_cell._extension()" > "$D/build.txt" 2>&1
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
  "split_1:g-fused-bf16:MSCRED_LSTM_CONV_CELL=0" "default_2:g-fused-bf16" "split_2:g-fused-bf16:MSCRED_LSTM_CONV_CELL=0"
grep -h "train fused + CUDA graph" "$D/model/log.txt"
echo "variants done at ${SECONDS}s"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_train.py tests/test_conv_cell.py \
  tests/test_ops_triton_convlstm.py tests/test_cli.py -k "not demo"
(cd "$OUT" && tar czf conv_cell_final.tgz conv_cell_final && rm -rf conv_cell_final)
