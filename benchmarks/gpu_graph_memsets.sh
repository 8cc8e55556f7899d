#!/usr/bin/env bash
# One device call (~6 min): the captured graphs' memset nodes made kernel nodes (ops/graph_memsets,
# MSCRED_GRAPH_MEMSET_KERNELS=1).
#   1. the GPU tests: tests/test_graph_memsets.py (the surgery byte for byte, the order across streams, the graphed
#      step's losses), and with the switch on the tests of the graphed steps and scoring graphs
#      (tests/test_level_streams.py, tests/test_train.py -k graph) -> NAME/gpu_tests.txt
#   2. the graphed bf16 training step with MSCRED_GRAPH_MEMSET_KERNELS=0 / 1 in alternation -> NAME/env_ab.md
#   3. the step's time line with the switch on (graph_timeline.py: are the gaps after the memsets gone?)
#      -> NAME/timeline/
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_graph_memsets.sh NAME
set -uo pipefail
NAME=${1:-graph_memsets}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 200 python3 -m mscred.cli.main env > "$D/env.txt" 2>&1
echo "env exit $? at ${SECONDS}s"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_graph_memsets.py
MSCRED_GRAPH_MEMSET_KERNELS=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests_switch_on.txt" 200 \
  tests/test_level_streams.py tests/test_train.py -k graph
echo "tests done at ${SECONDS}s"
timeout 220 python3 benchmarks/env_ab.py --var MSCRED_GRAPH_MEMSET_KERNELS --values 0,1 --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
MSCRED_GRAPH_MEMSET_KERNELS=1 timeout 150 python3 benchmarks/graph_timeline.py --replays 3 --out "$D/timeline" \
  > "$D/timeline_log.txt" 2>&1
echo "timeline exit $? at ${SECONDS}s"; grep -A3 "| replay" "$D/timeline/graph_timeline.md" | head -6
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
