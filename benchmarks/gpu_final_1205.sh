#!/usr/bin/env bash
# One short device call (~4 min), written 2026-12-05 with ~6 min of the session's device time left, after
# results/defaults_1205/ made MSCRED_DECONV_DIRECT and MSCRED_INTERLEAVED_LEVELS the defaults:
#   1. the graphed bf16 step in one alternation, 3 rounds: the defaults / both off            -> NAME/env_ab.md
#   2. GPU tests of the two and of the copy levers' model tests (now compared to rounding on CUDA:
#      model_runs.assert_same_step), as far as the cap allows                                 -> NAME/gpu_tests.txt
# Packed after each step, so a call cut short keeps what it has.   bash benchmarks/gpu_final_1205.sh NAME
# Ran once (results/final_1205/, cut by the session's device time); both switches are opt-in again since, so its
# variants now measure the same code: the next session's call is gpu_split_1205.sh.
set -uo pipefail
NAME=${1:-final_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 130 python3 benchmarks/env_ab.py --rounds 3 --out "$D" --variant "defaults:" \
  --variant "both_off:MSCRED_DECONV_DIRECT=0,MSCRED_INTERLEAVED_LEVELS=0" > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -3 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-110}" -rf tests/test_small_deconv.py \
  tests/test_interleaved_levels.py tests/test_window_loss.py tests/test_encoder_xh.py tests/test_attention_cat.py
echo "tests done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
