#!/usr/bin/env bash
# One device call (~6 min), written 2026-12-05 for the next session: which of the two opt-in levers is real.
# results/defaults_1205/ measured them alone at -20 us (MSCRED_DECONV_DIRECT=1, deconv1 on its own weight) and
# -7 us (MSCRED_INTERLEAVED_LEVELS=1, each ConvLSTM right after its convolution) on one host; results/final_1205/
# measured both together on another at no gain.
#   1. the graphed bf16 step in one alternation, 5 rounds: the defaults / each alone / both    -> NAME/env_ab.md
#   2. their GPU tests and the model tests' comparisons to rounding on CUDA (model_runs.assert_same_step)
#                                                                                              -> NAME/gpu_tests.txt
# Packed after each step.   bash benchmarks/gpu_next_1208.sh NAME
set -uo pipefail
NAME=${1:-next_1208}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
DD=MSCRED_DECONV_DIRECT=1; IL=MSCRED_INTERLEAVED_LEVELS=1
timeout 200 python3 benchmarks/env_ab.py --rounds 5 --out "$D" --variant "defaults:" --variant "deconv_direct:$DD" \
  --variant "interleaved:$IL" --variant "both:$DD,$IL" > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -5 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-200}" -rf tests/test_small_deconv.py \
  tests/test_interleaved_levels.py tests/test_window_loss.py tests/test_encoder_xh.py tests/test_attention_cat.py
echo "tests done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
