#!/usr/bin/env bash
# One device call (~8 min): the temporal attention of levels 1-2 fused into the resident ConvLSTM kernel
# (ops/lstm_attention.py, MSCRED_RESIDENT_ATTENTION) against the two kernels it replaces:
#   1. GPU tests: the fused attention, the resident kernel, shared-segment scoring                -> gpu_tests.txt
#   2. each level alone with its attention, one kernel / two kernels / per step (bench_lstm_attention.py)
#                                                                                        -> lstm_attention.{md,json}
#   3. the whole model, in alternation: fused, apart, fused (bench_train.py's graphed bf16 part; the eager
#      profile of scoring in each file)                                       -> fused_1.md, apart_1.md, fused_2.md
# Writes $OUT/NAME.tgz, NAME = $RESULT_NAME or lstm_attention.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=${RESULT_NAME:-lstm_attention}
D=$(result_dir "$NAME")
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_lstm_attention.py tests/test_resident_lstm.py \
  tests/test_forward_windows.py
bench_to_log "$D" 100 benchmarks/bench_lstm_attention.py --timed "one kernel,two kernels"
grep -E "^\| (scoring|1,024|batch)" "$D/lstm_attention.md"
OUT="$D" bash benchmarks/gpu_train_variants.sh . "fused_1:g-fused-bf16" \
  "apart_1:g-fused-bf16:MSCRED_RESIDENT_ATTENTION=0" "fused_2:g-fused-bf16"
python3 -m mscred env > "$D/env.txt" 2>&1
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
