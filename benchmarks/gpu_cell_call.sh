#!/usr/bin/env bash
# One device call on the cell kernels (~8-9 min): bench_cell_math.py's rows of one variant set, the fused ConvLSTM's
# GPU tests of a selection, and the graphed bf16 step under several settings in alternation.
#   bash benchmarks/gpu_cell_call.sh NAME SET BENCH_CAP_S TESTS_CAP_S TEST_EXPR SPEC [SPEC...]
#   SET        bench_cell_math.py --set (activations, waves)                         -> NAME/bench/
#   TEST_EXPR  pytest -k expression over tests/test_ops_triton_convlstm.py            -> NAME/gpu_tests.txt
#   SPEC       gpu_train_variants.sh's LABEL:PARTS[:VAR=VAL,...], each part cut at 45 s -> NAME/model/
# Writes $OUT/NAME.tgz. Its calls: gpu_cell_math.sh, gpu_cell_bytes.sh, gpu_cell_waves.sh, gpu_cell_wave_default.sh.
set -uo pipefail
NAME=$1; SET=$2; BENCH_CAP=$3; TESTS_CAP=$4; TEST_EXPR=$5; shift 5
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bench_to_log "$D/bench" "$BENCH_CAP" benchmarks/bench_cell_math.py --set "$SET"
tail -24 "$D/bench/bench_log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "$TESTS_CAP" tests/test_ops_triton_convlstm.py -k "$TEST_EXPR"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "$@"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
