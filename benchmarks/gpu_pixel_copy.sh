#!/usr/bin/env bash
# One device call (~9 min): the Triton pixel copy (ops/triton/pixel_copy.py, MSCRED_PIXEL_COPY_KERNEL=1; written
# 2026-12-04 late), then the bench_train table with whichever variant won.
#   1. GPU tests with MSCRED_PIXEL_COPY_KERNEL=1: tests/test_pixel_copy.py, tests/test_concat.py, the graphed
#      full-size steps of tests/test_train.py -> NAME/gpu_tests.txt
#   2. the graphed bf16 step with the switch 0 / 1 in alternation, 3 rounds -> NAME/env_ab.md, NAME/step_log.txt
#   3. the bench_train table (gpu_train_table.sh, the torch.compile row left out) with the switch at the A/B's
#      faster variant (the lower median of its rounds), which NAME/table_variant.txt names -> NAME/table/
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_pixel_copy.sh NAME
set -uo pipefail
NAME=${1:-pixel_copy}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
MSCRED_PIXEL_COPY_KERNEL=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_pixel_copy.py \
  tests/test_concat.py tests/test_train.py -k "pixel or concat or cat or cuda_graph_full_size"
echo "tests done at ${SECONDS}s"
timeout 100 python3 benchmarks/env_ab.py --var MSCRED_PIXEL_COPY_KERNEL --values 0,1 --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
WINNER=$(python3 benchmarks/env_ab_winner.py "$D/env_ab.md" 0)
echo "MSCRED_PIXEL_COPY_KERNEL=$WINNER (the A/B's faster variant)" | tee "$D/table_variant.txt"
MSCRED_PIXEL_COPY_KERNEL=$WINNER OUT="$D" TABLE_CAP_S=320 bash benchmarks/gpu_train_table.sh table \
  --only eager,g-fused-bf16,g-fused,g-ref-bf16,g-ref,e2e-cold,g-fused-bf16-heur --budget-s 290
echo "table done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
