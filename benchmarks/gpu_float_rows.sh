#!/usr/bin/env bash
# One device call (~5 min): the resident kernel's map rows by a float multiply (the default build) against the
# integer division by the map width (-DMSCRED_RESIDENT_INT_ROWS=1, the code of results/final_wgmma/), the index
# arithmetic Nsight Compute put at ~10% of the instructions (results/attention_ncu/).
#   1. GPU tests of the default build: the resident kernel's and the fused attention's   -> gpu_tests.txt
#   2. each level with its attention alone (bench_lstm_attention.py, one kernel), in alternation:
#      default, int_rows, default, int_rows                              -> {default,int_rows}_{1,2}/
#   3. the whole model (graphed bf16, gpu_train_variants.sh): default, int_rows, default            -> model/
# Writes $OUT/float_rows.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir float_rows)
INT="-DMSCRED_RESIDENT_INT_ROWS=1"
build_resident "$D" "" "$INT"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_resident_lstm.py tests/test_lstm_attention.py
for i in 1 2; do
  bench_level "$D" "default_$i" "" bench_lstm_attention.py "one kernel"
  bench_level "$D" "int_rows_$i" "$INT" bench_lstm_attention.py "one kernel"
done
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
  "int_rows_1:g-fused-bf16:MSCRED_RESIDENT_LSTM_FLAGS=$INT" "default_2:g-fused-bf16"
(cd "$OUT" && tar czf float_rows.tgz float_rows && rm -rf float_rows)
