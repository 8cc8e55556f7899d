#!/usr/bin/env bash
# One device call (~4 min): the side-stream tests on the GPU, the graphed bf16 training step with each encoder and
# decoder convolution's weight gradient queued before its data gradient (MSCRED_WGRAD_FIRST=1) against after (the
# default), 6 rounds in alternation, then the variant's replay time line (graph_timeline.py).
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt, timeline_first/}.
#   bash benchmarks/gpu_wgrad_first_ab.sh NAME
set -uo pipefail
NAME=${1:-wgrad_first_ab}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_wgrad_stream.py
timeout 200 python3 benchmarks/env_ab.py --var MSCRED_WGRAD_FIRST --values "0,1" --rounds "${ROUNDS:-6}" --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
MSCRED_WGRAD_FIRST=1 timeout 120 python3 benchmarks/graph_timeline.py --out "$D/timeline_first" > "$D/timeline_log.txt" 2>&1
echo "timeline exit $? at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
