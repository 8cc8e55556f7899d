#!/usr/bin/env bash
# One device call (~8.5 min), 2026-12-02's closing check: the GPU test suite on the final tree (the backward cell
# kernel's one-wave default and the relaxed bias atomics), then the whole model graphed bf16 with the defaults and
# with the backward at 5 programs per SM (MSCRED_CELL_WAVE=0/5: by the CPU compile its grid-stride code holds 96
# registers a thread, 5 blocks per SM, so the default 6 per SM makes 1.2 waves; results/cell_kernel_sass/).
# Usage: bash benchmarks/gpu_final_1202.sh. Writes $OUT/final_1202.tgz.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir final_1202)
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
GPU_SUITE_PACK=0 OUT="$D" bash benchmarks/gpu_suite_parallel.sh convlstm triton_ops train_im2col rest_a rest_b
echo "suite done at ${SECONDS}s"
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default:g-fused-bf16" \
  "wave5:g-fused-bf16:MSCRED_CELL_WAVE=0/5"
(cd "$OUT" && tar czf final_1202.tgz final_1202 && rm -rf final_1202)
