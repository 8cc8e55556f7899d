#!/usr/bin/env bash
# One device call (~8 min): the GPU test suite on the current tree, then the whole model once (the closing check of a
# session's kernel work; gpu_final_wgmma.sh, its first instance, now calls it).
#   1. the resident ConvLSTM extension built once, then gpu_suite_parallel.sh, every group but the im2col build
#      checks (nvcc on the standalone harness; run them when ops/im2col changes)         -> gpu_suite/, build.txt
#   2. the whole model, graphed bf16 (bench_train.py through gpu_train_variants.sh)      -> model/default.md
# Usage: NAME=<result folder> bash benchmarks/gpu_suite_and_model.sh. Writes $OUT/$NAME.tgz.
set -uo pipefail
. benchmarks/device_env.sh
NAME=${NAME:-suite_and_model}
D=$(result_dir "$NAME")
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
GPU_SUITE_PACK=0 OUT="$D" bash benchmarks/gpu_suite_parallel.sh convlstm triton_ops train_im2col rest_a rest_b
echo "suite done at ${SECONDS}s"
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default:g-fused-bf16"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
