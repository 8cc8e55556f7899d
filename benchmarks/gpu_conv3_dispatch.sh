#!/usr/bin/env bash
# One device call (~3 min): where conv3's two tiles of conv_patch_pad (ops/im2col/patch_pad.cuh) cross, for the
# dispatch rule patch_pad_big_pays (im2col.cu): the harness's product row ("pipe": the dispatch) beside both tiles
# forced (X424_1_3_2 = PatchPadSmall, X2410_5_4_1 = PatchPadBig) at batches around the rule's edges, then the
# fast-path GPU tests (both tiles and their tails against float64).
# Writes $OUT/conv3_dispatch/{probe.txt,gpu_tests_fast_paths.txt}. Usage (repository root, CUDA machine; carry
# build/conv_harness built on the CPU box): bash benchmarks/gpu_conv3_dispatch.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/conv3_dispatch"; mkdir -p "$D"
{
  bash benchmarks/machine_info.sh
  for b in 132 264 396 462 494 495 528 594 640 660 661 792 1056; do
    echo "## batch $b"
    timeout 30 build/conv_harness --iters 20 --batch "$b" --only conv3 --variants pipe,X424_1_3_2,X2410_5_4_1
  done
} > "$D/probe.txt" 2>&1
grep -E "^## |^conv3" "$D/probe.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_fast_paths.txt" 300 tests/test_im2col_fast_paths.py
