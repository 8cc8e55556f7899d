#!/usr/bin/env bash
# One device call (<9 min), session 56 (2026-12-05), after gpu_split_1205.sh on an H100 found every lever of
# sessions 52-53 slower or level and only the two older opt-in levers ahead (MSCRED_DECONV_DIRECT=1 -0.7%,
# MSCRED_INTERLEAVED_LEVELS=1 -0.9%, each alone): whether they add up, and their GPU tests, before either becomes
# a default.
#   1. the graphed bf16 step, 3 rounds: defaults / both / each alone                           -> NAME/env_ab.md
#   2. the GPU tests of the two levers and the model comparisons that run them               -> NAME/gpu_tests.txt
#   bash benchmarks/gpu_direct_interleaved_1205.sh NAME
set -uo pipefail
NAME=${1:-direct_interleaved_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 150 python3 benchmarks/env_ab.py --rounds 3 --out "$D" --variant "defaults:" \
  --variant "both:MSCRED_DECONV_DIRECT=1,MSCRED_INTERLEAVED_LEVELS=1" \
  --variant "deconv_direct:MSCRED_DECONV_DIRECT=1" --variant "interleaved:MSCRED_INTERLEAVED_LEVELS=1" \
  > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -6 "$D/env_ab.md"; pack_result "$NAME"
LEFT=$(( ${BUDGET_S:-480} - SECONDS )); [ "$LEFT" -gt 20 ] || LEFT=20
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "$LEFT" -rf tests/test_small_deconv.py \
  tests/test_interleaved_levels.py tests/test_train_parts.py
echo "tests done at ${SECONDS}s"
pack_result "$NAME" && rm -rf "$OUT/$NAME"
