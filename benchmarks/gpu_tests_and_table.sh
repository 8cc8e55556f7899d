#!/usr/bin/env bash
# One device call (~9 min): GPU tests (the pytest arguments given), then the bench_train.py table on the code as it
# stands (the torch.compile row left out, as in results/train_final_1204/).
# Writes $OUT/NAME/gpu_tests.txt and $OUT/NAME/table/ (gpu_train_table.sh's files), packed as $OUT/NAME.tgz.
#   bash benchmarks/gpu_tests_and_table.sh NAME [pytest arguments...]
# TEST_TIMEOUT_S caps the tests (default 200 s), TABLE_CAP_S the table (default 330 s).
set -uo pipefail
NAME=$1; shift
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-200}" "$@"
echo "tests done at ${SECONDS}s"
OUT="$D" TABLE_CAP_S=${TABLE_CAP_S:-330} bash benchmarks/gpu_train_table.sh table \
  --only eager,g-fused-bf16,g-fused,g-ref-bf16,g-ref,e2e-cold,g-fused-bf16-heur --budget-s 300
echo "table done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
