#!/usr/bin/env bash
# One device call (~5 min): the first measurement of the direct conv1 kernel (conv_direct3x3, ops/im2col/direct.cuh)
# against the product's tensor-core kernel, and the checks it needs before it can become the default:
#   1. the harness (build/conv_harness, built on the CPU box and carried): conv1 rows pipe / direct1 / direct2 /
#      direct2_128 / direct1_128 / direct4 at batch 640, checked at batches 7 and 643 and at n = 16 and 55, and an
#      Nsight Compute profile of direct2 -> $OUT/conv_probe/{probe.txt, ncu.txt}
#   2. the GPU tests through PyTorch with MSCRED_CONV1_KERNEL=direct: the direct kernel against float64
#      and the patch kernel (tests/test_im2col_fast_paths.py), the encoder op grid of the implicit-pipe variant,
#      forward and gradients (tests/test_ops_im2col.py) -> $OUT/conv1_direct/gpu_tests.txt
#   3. bench_conv.py --timing graph (the record) with the switch off and on, in one call
#      -> $OUT/conv1_direct/{off,on}/conv.md
# Usage (repository root, CUDA machine; carry build/conv_harness): bash benchmarks/gpu_conv1_direct_ab.sh
# If direct wins: make it the default for conv1-shaped layers in implicit_pipelined_forward (im2col.cu) and keep the
# switch for the way back.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
export OUT PYTHONPATH=src PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_extensions}
D="$OUT/conv1_direct"; mkdir -p "$D/off" "$D/on"
SPEC="conv1:pipe,direct1,direct2,direct2_128,direct1_128,direct4" TAIL_BATCHES="7 643" TAIL_N="16 55" \
  NCU_VARIANTS=direct2 NCU_KERNELS=conv_direct3x3 timeout 150 bash benchmarks/gpu_conv_probe.sh
MSCRED_CONV1_KERNEL=direct bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_im2col_fast_paths.py \
  tests/test_ops_im2col.py -k "not test_ops_im2col or implicit-pipe"
for mode in off on; do
  value=""; [ $mode = on ] && value=direct
  MSCRED_CONV1_KERNEL=$value timeout 130 python3 benchmarks/bench_conv.py --timing graph --out "$D/$mode" \
    > "$D/$mode/conv.log" 2>&1
  echo "bench_conv ($mode) exit code $?"
  grep -E "^\| conv1 \| (cudnn|implicit-pipe) " "$D/$mode/conv.md"
done
