#!/usr/bin/env bash
# One device call (~5-6 min): a setting of the training step against the defaults, then its GPU tests.
#   bash benchmarks/gpu_setting_ab.sh NAME LABEL VAR=VAL[,VAR=VAL...] TESTS_CAP_S PYTEST_ARGS...
# bench_train.py's graphed bf16 part in alternation, twice: default_1, LABEL_1 (the setting), default_2, LABEL_2
# (gpu_train_variants.sh, each part cut at 45 s) -> $OUT/NAME/*.md and log.txt; then pytest PYTEST_ARGS with the
# setting under a TESTS_CAP_S cap -> $OUT/NAME/gpu_tests.txt. Its calls: gpu_dgrad_gemm.sh, gpu_attention_partial.sh,
# gpu_attention_apart.sh (and at 97ce8d7 gpu_im2col_step.sh).
# The setting goes to the whole pytest process: a test that asserts the setting's default fails under it.
set -uo pipefail
NAME=$1; LABEL=$2; SETTING=$3; TESTS_CAP=$4; shift 4
. benchmarks/device_env.sh
D=$(result_dir "$NAME")
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh "$NAME" \
  "default_1:g-fused-bf16" "${LABEL}_1:g-fused-bf16:$SETTING" "default_2:g-fused-bf16" "${LABEL}_2:g-fused-bf16:$SETTING"
echo "variants done at ${SECONDS}s"
env ${SETTING//,/ } bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "$TESTS_CAP" "$@"
