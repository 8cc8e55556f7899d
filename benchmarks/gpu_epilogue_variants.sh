#!/usr/bin/env bash
# One device call (~8 min): the resident kernel's attention epilogue, three builds, and the GPU tests of everything
# changed after the last device call (81e5b07):
#   default  128-bit global stores (MSCRED_RESIDENT_WIDE_STORES=1) and the softmax's partials summed once
#   narrow   -DMSCRED_RESIDENT_WIDE_STORES=0: the plain uint4 assignments NVVM splits into 4-byte stores
#   fold     -DMSCRED_RESIDENT_FOLD_SCORES=1: the scores gathered in the last step's updates (wide stores too)
# 1. GPU tests, default build: the fused attention's and the resident kernel's         -> gpu_tests_default.txt
# 2. the fused attention's GPU tests with the fold build                               -> gpu_tests_fold.txt
# 3. each level with its attention alone (bench_lstm_attention.py), in alternation: default (one kernel and two
#    kernels), narrow, fold, default again                          -> default_1/, narrow/, fold/, default_2/
# 4. if the call has time left (SECONDS < 330): the whole model, default then narrow (bench_train.py's graphed bf16
#    part, gpu_train_variants.sh)                                                      -> model/
# Writes $OUT/epilogue_variants.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir epilogue_variants)
NARROW="-DMSCRED_RESIDENT_WIDE_STORES=0"
FOLD="-DMSCRED_RESIDENT_FOLD_SCORES=1"
build_resident "$D" "" "$NARROW" "$FOLD"
echo "built at ${SECONDS}s"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_default.txt" 150 tests/test_lstm_attention.py tests/test_resident_lstm.py
MSCRED_RESIDENT_LSTM_FLAGS="$FOLD" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_fold.txt" 90 tests/test_lstm_attention.py
echo "tested at ${SECONDS}s"
bench_level "$D" default_1 "" bench_lstm_attention.py "one kernel,two kernels"
bench_level "$D" narrow "$NARROW" bench_lstm_attention.py "one kernel"
bench_level "$D" fold "$FOLD" bench_lstm_attention.py "one kernel"
bench_level "$D" default_2 "" bench_lstm_attention.py "one kernel"
if [ "$SECONDS" -lt 330 ]; then
  OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default:g-fused-bf16" \
    "narrow:g-fused-bf16:MSCRED_RESIDENT_LSTM_FLAGS=$NARROW"
else
  echo "no time left for the whole model (${SECONDS}s)"
fi
(cd "$OUT" && tar czf epilogue_variants.tgz epilogue_variants && rm -rf epilogue_variants)
