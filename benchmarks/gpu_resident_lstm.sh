#!/usr/bin/env bash
# One device call (~9 min): the window-resident ConvLSTM kernel (ops/resident_lstm, CUDA C++) for levels 1-2 of bf16
# inference, against the Triton paths it replaces:
#   1. its GPU tests, the per-window and model-window tests beside them           -> gpu_tests.txt
#   2. each level alone, three paths in one process (bench_resident_lstm.py)        -> resident_lstm.{md,json}
#   3. bench_train.py's graphed bf16 part (training step, inference, end to end), twice in alternation:
#      triton_{1,2} (MSCRED_RESIDENT_LSTM=0, the previous product) and resident_{1,2} (the defaults)
# The folder comes back as $OUT/resident_lstm.tgz (the device returns at most 8 files).
# Usage (repository root, CUDA machine): bash benchmarks/gpu_resident_lstm.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_lstm)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_resident_lstm.py tests/test_forward_windows.py \
  tests/test_ops_triton_convlstm.py -k "resident or window or full_size_bf16 or graphed_window or sliding"
bench_to_log "$D" 150 benchmarks/bench_resident_lstm.py
tail -12 "$D/bench_log.txt"
bash benchmarks/gpu_train_variants.sh resident_lstm "triton_1:g-fused-bf16:MSCRED_RESIDENT_LSTM=0" \
  "resident_1:g-fused-bf16" "triton_2:g-fused-bf16:MSCRED_RESIDENT_LSTM=0" "resident_2:g-fused-bf16"
(cd "$OUT" && tar czf resident_lstm.tgz resident_lstm && rm -rf resident_lstm)
