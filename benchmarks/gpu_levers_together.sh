#!/usr/bin/env bash
# One device call (~9 min), written 2026-12-05 without device time: the four opt-in levers that remove copies of
# the graphed bf16 training step, alone and together, in one alternation (each ~5-20 us by the time line, inside a
# 4-round spread alone; together ~40-60 us by our arithmetic):
#   MSCRED_ENCODER_XH=1         conv1's / conv2's epilogues store levels 1-2 into their [x, h] buffers too
#   MSCRED_ATTENTION_CAT=1      levels 1-3's attention written into the decoder's concatenations
#   MSCRED_LSTM_WHOLE_WEIGHT=1  levels 1-2's gate weight cast whole, its halves views of it
#   MSCRED_LSTM_DX_ALL_STEPS=1  level 2's input gradient in one call after its steps
#   and, in "all" only (~6 us, below any spread alone): MSCRED_DECONV_DIRECT=1, deconv1 on its own weight
#   1. the GPU tests of the four (each: the bf16 model at n = 30 through its path, the same loss and gradients as
#      off) and of the weight cache (conv1's / deconv1's weight gradients in the cast's layout, the default since
#      2026-12-05) -> NAME/gpu_tests.txt
#   2. env_ab.py with the variants off / each of the four alone / all five, 3 rounds -> NAME/env_ab.md
# Then gpu_copy_levers.sh's op-level GPU tests and the per-lever calls in docs/training-kernel-plan.md for the
# levers this says to keep. Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_levers_together.sh NAME
# Ran once, 2026-12-05 at ac964f9 (results/levers_together/). MSCRED_LSTM_WHOLE_WEIGHT and MSCRED_LSTM_DX_ALL_STEPS
# lost there and were removed (their code and tests: git show ac964f9), and the other three are the defaults since,
# so its variants now measure the defaults again: rerun it from that commit.
set -uo pipefail
NAME=${1:-levers_together}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_whole_weight.py tests/test_dx_all_steps.py \
  tests/test_weight_cache.py tests/test_encoder_xh.py tests/test_attention_cat.py tests/test_small_deconv.py
echo "tests done at ${SECONDS}s"
XH=MSCRED_ENCODER_XH=1; CAT=MSCRED_ATTENTION_CAT=1; WW=MSCRED_LSTM_WHOLE_WEIGHT=1; DX=MSCRED_LSTM_DX_ALL_STEPS=1
DD=MSCRED_DECONV_DIRECT=1
timeout 330 python3 benchmarks/env_ab.py --rounds 3 --out "$D" --variant "off:" --variant "encoder_xh:$XH" \
  --variant "attention_cat:$CAT" --variant "whole_weight:$WW" --variant "dx_all_steps:$DX" \
  --variant "all:$XH,$CAT,$WW,$DX,$DD" > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -9 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
