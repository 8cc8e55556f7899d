#!/usr/bin/env bash
# One device call (~4 min): where the fused bf16 training step's time goes, and the step against eager.
#   1. profile_train_step.py --levels: the eager step's kernels, ops with shapes, one step's kernels in launch order;
#      the graphed step's replays; each ConvLSTM level's forward and backward           -> train_step_profile.txt
#   2. the whole model (graphed bf16 step, gpu_train_variants.sh): twice with the defaults, or the gpu_train_variants
#      SPECs in MODEL_SPECS (space-separated)                                          -> model/
#   3. GPU tests of the code changed since the last device run (the test files in GPU_TESTS)   -> gpu_tests.txt
# Usage: NAME=<result folder> [MODEL_SPECS=...] [GPU_TESTS=...] bash benchmarks/gpu_train_profile.sh.
# Writes $OUT/$NAME.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=${NAME:-train_profile}
D=$(result_dir "$NAME")
bench_to_log "$D" 200 benchmarks/profile_train_step.py --levels
grep "^## " "$D/train_step_profile.txt"
# shellcheck disable=SC2086 (word splitting of the lists is meant)
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model \
  ${MODEL_SPECS:-default_1:g-fused-bf16 default_2:g-fused-bf16}
# shellcheck disable=SC2086
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 \
  ${GPU_TESTS:-tests/test_padding.py tests/test_model.py tests/test_ops_triton_convlstm.py} \
  -k "not float64_equals and not window"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
