#!/usr/bin/env bash
# One device call (~6 min), written 2026-12-04 (late) after that session's device was no longer lent, for the next:
#   1. the step's time line with the Triton pixel copy on (MSCRED_PIXEL_COPY_KERNEL=1: the copies' own times against
#      PyTorch's in results/next_1206/timeline/) -> NAME/timeline_copy/, then with the defaults (the decoder's
#      concatenation epilogue since adopted; for the README's "where the time goes now" table) -> NAME/timeline/
#   2. the GPU tests not yet run on what changed: the graphed full-size steps of tests/test_train.py with the pixel
#      copy on (cut by the time cap in results/pixel_copy/) -> NAME/gpu_tests_copy.txt; tests/test_bias_act_cat.py
#      with the concatenation epilogue as the default, tests/test_wgrad_stream.py on the side stream as it was before
#      the green context -> NAME/gpu_tests.txt
#   3. the graphed bf16 step with MSCRED_PIXEL_COPY_KERNEL 0 / 1 in alternation, 5 rounds -> NAME/env_ab.md
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_next_1207.sh NAME
set -uo pipefail
NAME=${1:-next_1207}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
MSCRED_PIXEL_COPY_KERNEL=1 timeout 200 python3 benchmarks/graph_timeline.py --replays 5 --out "$D/timeline_copy" \
  > "$D/timeline_copy_log.txt" 2>&1
echo "time line (pixel copy) exit $? at ${SECONDS}s"
timeout 150 python3 benchmarks/graph_timeline.py --replays 5 --out "$D/timeline" > "$D/timeline_log.txt" 2>&1
echo "time line (defaults) exit $? at ${SECONDS}s"
MSCRED_PIXEL_COPY_KERNEL=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests_copy.txt" 150 tests/test_train.py \
  -k "cuda_graph_full_size"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 tests/test_bias_act_cat.py tests/test_wgrad_stream.py
echo "tests done at ${SECONDS}s"
timeout 150 python3 benchmarks/env_ab.py --var MSCRED_PIXEL_COPY_KERNEL --values 0,1 --rounds 5 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
