#!/usr/bin/env bash
# One device call (~6 min), written 2026-12-04 (night) without device time, for the next session: the training
# encoder writing levels 1-2 into their ConvLSTM's [x, h] buffers (MSCRED_ENCODER_XH=1, ops/encoder_xh.py).
#   1. its GPU tests: tests/test_encoder_xh.py (the bf16 model at n = 30 takes the path at levels 1-2, the same loss
#      and gradients as off), then the graphed full-size training steps of tests/test_train.py with it on
#      -> NAME/gpu_tests.txt, NAME/gpu_tests_train.txt
#   2. the graphed bf16 step with MSCRED_ENCODER_XH 0 / 1 in alternation, 5 rounds -> NAME/env_ab.md
#   3. the step's time line with it on (the copies and fills it removes, the epilogues' longer stores)
#      -> NAME/timeline/
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_encoder_xh.sh NAME
set -uo pipefail
NAME=${1:-encoder_xh}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_encoder_xh.py
MSCRED_ENCODER_XH=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests_train.txt" 150 tests/test_train.py \
  -k "cuda_graph_full_size"
echo "tests done at ${SECONDS}s"
timeout 150 python3 benchmarks/env_ab.py --var MSCRED_ENCODER_XH --values 0,1 --rounds 5 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
MSCRED_ENCODER_XH=1 timeout 150 python3 benchmarks/graph_timeline.py --replays 5 --out "$D/timeline" \
  > "$D/timeline_log.txt" 2>&1
echo "time line exit $? at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
