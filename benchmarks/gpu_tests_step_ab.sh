#!/usr/bin/env bash
# One device call: the GPU tests given (if any), then the graphed bf16 training step with one switch in alternation
# (env_ab.py), packed as $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_tests_step_ab.sh NAME VAR VALUES ROUNDS [pytest arguments...]
# VALUES as env_ab.py's --values (comma-separated; an empty value leaves VAR unset). TEST_TIMEOUT_S caps the tests
# (default 300 s), AB_TIMEOUT_S the A/B (default 220 s).
set -uo pipefail
NAME=$1; VAR=$2; VALUES=$3; ROUNDS=$4; shift 4
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
if [ $# -gt 0 ]; then
  bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-300}" "$@"
  echo "tests done at ${SECONDS}s"
fi
timeout "${AB_TIMEOUT_S:-220}" python3 benchmarks/env_ab.py --var "$VAR" --values "$VALUES" --rounds "$ROUNDS" \
  --out "$D" > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -6 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
