#!/usr/bin/env bash
# One device call (~8 min), prepared on 2026-11-30 and NOT YET RUN: the attention's scores gathered during the
# resident kernel's last step (-DMSCRED_RESIDENT_FOLD_SCORES=1: each lane's h_T chunks dotted with h_{T-1} and the
# scratch maps as they are computed, summed per warp into shared memory, so that the epilogue keeps only its second
# pass) against the default build; and the GPU tests of the code changed after the last device call (81e5b07):
#   1. GPU tests, default build: the fused attention's (new: blocks past twice the SM count, opcheck, the model's
#      forward on and off) and the resident kernel's                                      -> gpu_tests_default.txt
#   2. the fused attention's GPU tests with the fold build                                 -> gpu_tests_fold.txt
#   3. each level with its attention alone: default (one kernel and two kernels), fold (one kernel)
#                                                                                           -> default/, fold/
#   4. the whole model, in alternation: default, fold, default (bench_train.py's graphed bf16 part)
#                                                                           -> default_1.md, fold_1.md, default_2.md
# Writes $OUT/fold_scores.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir fold_scores)
FOLD="-DMSCRED_RESIDENT_FOLD_SCORES=1"
build_resident "$D" "" "$FOLD"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_default.txt" 150 tests/test_lstm_attention.py tests/test_resident_lstm.py
MSCRED_RESIDENT_LSTM_FLAGS="$FOLD" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_fold.txt" 90 tests/test_lstm_attention.py
timeout 100 python3 benchmarks/bench_lstm_attention.py --timed "one kernel,two kernels" --out "$D/default" \
  > "$D/default_log.txt" 2>&1
MSCRED_RESIDENT_LSTM_FLAGS="$FOLD" timeout 100 python3 benchmarks/bench_lstm_attention.py --timed "one kernel" \
  --out "$D/fold" > "$D/fold_log.txt" 2>&1
for v in default fold; do echo "== $v"; grep -E "^\| (scoring|1,024|batch)" "$D/$v/lstm_attention.md"; done
OUT="$D" bash benchmarks/gpu_train_variants.sh . "default_1:g-fused-bf16" \
  "fold_1:g-fused-bf16:MSCRED_RESIDENT_LSTM_FLAGS=$FOLD" "default_2:g-fused-bf16"
(cd "$OUT" && tar czf fold_scores.tgz fold_scores && rm -rf fold_scores)
