#!/usr/bin/env bash
# One device call (~5 min): PackedAdam (packed_adam.py, ops/triton/adam.py) on the H200 -- its GPU tests and the
# graphed-training tests beside them, Adam's step alone against torch's fused Adam at the step's layout (launch
# tiles swept), then the graphed bf16 training step with MSCRED_PACKED_ADAM=0 / 1 in alternation (env_ab.py).
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, packed_adam.md, bench_log.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_packed_adam.sh NAME
set -uo pipefail
NAME=${1:-packed_adam}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_packed_adam.py tests/test_train.py
echo "tests done at ${SECONDS}s"
bench_to_log "$D" 120 benchmarks/bench_packed_adam.py --tiles "${TILES:-1024/4,2048/8,512/4}"
tail -12 "$D/packed_adam.md"; echo "bench done at ${SECONDS}s"
timeout 420 python3 benchmarks/env_ab.py --var MSCRED_PACKED_ADAM --values 0,1 --rounds "${ROUNDS:-3}" --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -12 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
