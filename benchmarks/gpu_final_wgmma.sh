#!/usr/bin/env bash
# One device call (~8 min): the GPU test suite on the commit that made the warpgroup-MMA resident kernel the default
# (results/resident_wgmma/), and the whole model with it once more.
#   1. gpu_suite_parallel.sh, every group but the im2col build checks (unchanged)        -> gpu_suite/
#   2. the whole model, graphed bf16 (bench_train.py through gpu_train_variants.sh)      -> model/default.md
# Writes $OUT/final_wgmma.tgz.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir final_wgmma)
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
OUT="$D" bash benchmarks/gpu_suite_parallel.sh convlstm triton_ops train_im2col rest_a rest_b
echo "suite done at ${SECONDS}s"
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default:g-fused-bf16"
(cd "$OUT" && tar czf final_wgmma.tgz final_wgmma && rm -rf final_wgmma)
