#!/usr/bin/env bash
# One device call: the Triton kernels of the default GPU training run (`mscred train --bf16 --batch-size 128` on
# the paper's 30 sensors, fused backend, CUDA graphs) as Triton compiled them for this GPU -- each launch's own
# specialisation (its constexprs, the strides equal to 1 and the multiples of 16) -- so that `mscred sass lines`,
# `inspect` and `diff` read them on a machine without a GPU, lines mapped back to the checkout by --source-dir:
#   bash benchmarks/gpu_step_cubins.sh NAME   ->   $OUT/NAME/cubins.tgz (Triton's cache: *.cubin, *.json, ...),
#                                                   $OUT/NAME/kernels.txt (sass inspect of every cubin), log.txt
set -uo pipefail
NAME=${1:-step_cubins}
. benchmarks/device_env.sh
D=$(result_dir "$NAME")
export TRITON_CACHE_DIR=/tmp/mscred_step_triton_cache
rm -rf "$TRITON_CACHE_DIR" /tmp/mscred_step && mkdir -p /tmp/mscred_step
{
  python3 -m mscred generate /tmp/mscred_step/data --sensors 30 --length 20000 &&
  timeout 300 python3 -m mscred train /tmp/mscred_step/data/train.csv --out /tmp/mscred_step/model --epochs 2 \
    --batch-size 128 --bf16 --quiet
  echo "train exit $?"
} > "$D/log.txt" 2>&1
(cd "$TRITON_CACHE_DIR" && tar czf "$D/cubins.tgz" .)
find "$TRITON_CACHE_DIR" -name '*.cubin' | sort | xargs python3 -m mscred sass inspect > "$D/kernels.txt" 2>&1
echo "cubins: $(find "$TRITON_CACHE_DIR" -name '*.cubin' | wc -l)" | tee -a "$D/log.txt"
tail -3 "$D/log.txt"
