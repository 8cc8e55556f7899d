#!/usr/bin/env bash
# One device call (~4 min): the decoder's bias + SELU written into its skip concatenation
# (ops/triton/bias_act_cat.py, MSCRED_DECODER_CAT_EPILOGUE=1; written 2026-12-04 without device time): its GPU tests
# (tests/test_bias_act_cat.py, and tests/test_train.py -k graph with the switch on), then the graphed bf16 step with
# the switch 0 / 1 in alternation, 3 rounds -> $OUT/NAME.tgz
#   bash benchmarks/gpu_decoder_cat.sh NAME
set -uo pipefail
NAME=${1:-decoder_cat}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
MSCRED_DECODER_CAT_EPILOGUE=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_bias_act_cat.py \
  tests/test_train.py -k "cat or graph"
timeout 200 python3 benchmarks/env_ab.py --var MSCRED_DECODER_CAT_EPILOGUE --values 0,1 --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
