#!/usr/bin/env bash
# One device call (~8 min), NOT RUN YET: the ConvLSTM's weight gradients in one pass over dpre
# (ops/triton/lstm_wgrad.py, opt-in MSCRED_LSTM_WGRAD=1) against cuDNN, and on the whole step.
#   1. tests/test_lstm_wgrad.py on the GPU                                              -> gpu_tests.txt
#   2. bench_lstm_wgrad.py: per level, cuDNN against the kernel under each tile        -> wgrad/
#   3. the graphed bf16 step off / on / off / on in alternation                        -> model/
# Usage: bash benchmarks/gpu_lstm_wgrad.sh. Writes $OUT/lstm_wgrad.tgz. If step 2 finds a better tile than
# lstm_wgrad.TILE, rerun step 3 with MSCRED_LSTM_WGRAD_TILE set in the "on" specs.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir lstm_wgrad)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 60 tests/test_lstm_wgrad.py
bench_to_log "$D/wgrad" 120 benchmarks/bench_lstm_wgrad.py
grep "|" "$D/wgrad/lstm_wgrad.md" | head -40
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "off_1:g-fused-bf16" \
  "on_1:g-fused-bf16:MSCRED_LSTM_WGRAD=1" "off_2:g-fused-bf16" "on_2:g-fused-bf16:MSCRED_LSTM_WGRAD=1"
(cd "$OUT" && tar czf lstm_wgrad.tgz lstm_wgrad && rm -rf lstm_wgrad)
