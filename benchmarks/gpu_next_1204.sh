#!/usr/bin/env bash
# One device call (~4 min), written 2026-12-04 after that session's device time was spent, for the next one:
#   1. GPU tests: tests/test_packed_adam.py (its graphed resume test failed on 2026-12-04, results/gpu_tests_1204e/;
#      the fix after it has run on the CPU only), tests/test_weight_transpose.py and tests/test_weight_cache.py
#      (transpose_parts, the weight cache's backward reading the targets' gradients in place)
#   2. env_ab.py: the graphed bf16 training step with MSCRED_WEIGHT_GRAD_PARTS=0 / 1 in alternation (the opt-in
#      switch; the concatenation it removes took 11.4 us, results/graph_timeline_shapes/)
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_next_1204.sh NAME
set -uo pipefail
NAME=${1:-next_1204}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-300}" tests/test_packed_adam.py \
  tests/test_weight_transpose.py tests/test_weight_cache.py
echo "tests done at ${SECONDS}s"
timeout 200 python3 benchmarks/env_ab.py --var MSCRED_WEIGHT_GRAD_PARTS --values 0,1 --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -5 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
