#!/usr/bin/env bash
# One device call (~9.5 min; caps 140 + 100 + 300 s), written 2026-12-05 after results/levers_together/ made
# MSCRED_ENCODER_XH and MSCRED_ATTENTION_CAT the defaults (and with the training step's window weights inside the
# loss kernels, untimed). Ran once (results/defaults_1205/); its two lever variants were made the defaults on it and
# went back to opt-in after results/final_1205/ (gpu_split_1205.sh measures them again):
#   1. the GPU tests of what the defaults changed: the two levers' own tests, the loss kernels', deconv1's direct
#      path and the weight cache's, the graphed full-size training steps         -> NAME/gpu_tests.txt
#   2. the graphed bf16 step in one alternation, 3 rounds: the new defaults / both levers off (the old defaults) /
#      the defaults with MSCRED_DECONV_DIRECT=1 (deconv1 on its own weight, not yet measured alone) / with
#      MSCRED_INTERLEAVED_LEVELS=1 (each ConvLSTM right after its convolution: the backward's order changed so that
#      level 1's weight gradient no longer holds the SMs the encoder's data gradient waits for) -> NAME/env_ab.md
#   3. the bench_train.py table on the new defaults, without the torch.compile row  -> NAME/table/
# Comes back as $OUT/NAME.tgz (WITH_TABLE=0: steps 1-2 only).   bash benchmarks/gpu_defaults_1205.sh NAME
set -uo pipefail
NAME=${1:-defaults_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 140 tests/test_encoder_xh.py tests/test_attention_cat.py \
  tests/test_window_loss.py tests/test_interleaved_levels.py tests/test_small_deconv.py tests/test_weight_cache.py \
  tests/test_train.py \
  -k "not test_train.py or cuda_graph_full_size"
echo "tests done at ${SECONDS}s"
timeout 100 python3 benchmarks/env_ab.py --rounds 3 --out "$D" --variant "defaults:" \
  --variant "old_defaults:MSCRED_ENCODER_XH=0,MSCRED_ATTENTION_CAT=0" --variant "deconv_direct:MSCRED_DECONV_DIRECT=1" \
  --variant "interleaved:MSCRED_INTERLEAVED_LEVELS=1" \
  > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -6 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME")  # packed now too: a call cut short in the table still brings these back
[ "${WITH_TABLE:-1}" = 1 ] || { rm -rf "$OUT/$NAME"; exit 0; }
OUT="$D" TABLE_CAP_S=300 bash benchmarks/gpu_train_table.sh table \
  --only eager,g-fused-bf16,g-fused,g-ref-bf16,g-ref,e2e-cold,g-fused-bf16-heur --budget-s 270
echo "table done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
