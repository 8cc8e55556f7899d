#!/usr/bin/env bash
# One device call (~6 min): the training ConvLSTM's step kernels (ops/triton/convlstm_step.py) on the H200.
#   1. bench_train_steps.py: levels 1-2 alone, the per-step path against the step kernels' tiles  -> train_steps.md
#   2. their GPU tests, and the fused ConvLSTM's                                                 -> gpu_tests.txt
#   3. the whole model's graphed bf16 step (gpu_train_variants.sh): the step kernels with their defaults, with the
#      sweep's fastest tiles, and the per-step path (MSCRED_STEP_GEMM=0), in one run             -> model/
# Usage: NAME=<result folder> bash benchmarks/gpu_train_steps.sh. Writes $OUT/$NAME.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=${NAME:-train_steps}
D=$(result_dir "$NAME")
bench_to_log "$D" 170 benchmarks/bench_train_steps.py
grep -E "^\|" "$D/train_steps.md" || tail -20 "$D/bench_log.txt"
BEST=$(cat "$D/best_blocks.txt" 2>/dev/null)
echo "fastest tiles: ${BEST:-none}"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_convlstm_step.py tests/test_ops_triton_convlstm.py \
  -k "step or full_size or autocast or cuda_graph or time_major"
SPECS=("steps:g-fused-bf16" "per_step:g-fused-bf16:MSCRED_STEP_GEMM=0")
[ -n "$BEST" ] && SPECS+=("best:g-fused-bf16:MSCRED_STEP_BLOCKS=$BEST")
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "${SPECS[@]}"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
