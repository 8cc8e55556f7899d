#!/usr/bin/env bash
# One device call (~7 min), written 2026-12-04 (night) after that session's device time was spent, for the next one:
#   1. the step's time line with today's defaults (graph_timeline.py; the README's "where the time goes now" table
#      comes from such a capture) -> NAME/timeline/
#   2. the GPU tests of what changed after its last GPU runs: tests/test_ops_triton_small_conv.py (conv1's weight
#      gradient with 2 programs an SM, the default since results/conv1_wgrad_share/), tests/test_ops_triton_attention.py
#      (its split test pinned to the recomputing backward, the saved-scores test with NaN-filled partials),
#      tests/test_graph_memsets.py -> NAME/gpu_tests.txt
#   3. the graphed step with conv1's weight-gradient tile 128/4/8 (the old default) / unset in alternation, 3 rounds,
#      on another host -> NAME/env_ab.md  (2 and 3: gpu_tests_step_ab.sh)
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_next_1206.sh NAME
set -uo pipefail
NAME=${1:-next_1206}
. benchmarks/device_env.sh
mkdir -p "$OUT/$NAME"
timeout 150 python3 benchmarks/graph_timeline.py --replays 5 --out "$OUT/$NAME/timeline" \
  > "$OUT/$NAME/timeline_log.txt" 2>&1
echo "timeline exit $? at ${SECONDS}s"; grep -A7 "| replay" "$OUT/$NAME/timeline/graph_timeline.md" | head -9
TEST_TIMEOUT_S=240 AB_TIMEOUT_S=200 exec bash benchmarks/gpu_tests_step_ab.sh "$NAME" MSCRED_SMALL_CONV_WGRAD_TILE \
  "128/4/8," 3 tests/test_ops_triton_small_conv.py tests/test_ops_triton_attention.py tests/test_graph_memsets.py
