#!/usr/bin/env bash
# One device call (~1-2 minutes): the three kernel candidates written on 2026-11-30 without a GPU, each timed beside
# the product's kernel for its layer in the standalone harness, checked at awkward sizes (the harness compares every
# row with a float64 reference: "ok" or "WRONG"), with the product's probes beside them:
#   * conv2: PRODUCER_ROUNDS (halo_s2.cuh, rows halo2_round*): the producers round their staged copies in place, so
#     that the consumers, the kernel's longer side, skip their TF32 conversions; against halo2 (the product).
#   * conv4: conv_patch_ws (benchmarks/conv4_ws.cuh, row WS245_10_4): a copy warp issuing bulk copies that complete on
#     mbarriers, 8 MMA warps without block barriers; against R245_10_4_1 (the product's tile) and pipe (the product's
#     dispatch).
#   * conv3: conv_patch_pad (benchmarks/conv3_patch.cuh, rows X*, four tiles): whole 8-channel runs of the 15 x 15
#     planes copied as they are, conv_patch's fragments with the taps on the missing row / column masked; against
#     pipe and p424_32_3_2 (the product's tile), with that tile's probes without copies / MMAs / epilogue (conv3 is
#     memory-bound by bench_conv's roofline and at 0.30 of the copy bandwidth). A conv3 winner also needs a
#     launcher in im2col.cu and the GPU tests at awkward sizes before it can be the product's.
# Adopt a candidate if it is faster at batch 640 and 643 and "ok" everywhere (then the record: gpu_conv2_halo.sh and
# bench_conv.py --timing graph, and the GPU tests); delete it otherwise, with its numbers in docs/kernel-experiments.md.
# Writes $OUT/conv_probe/{probe.txt,ncu.txt}. Usage (repository root, carry build/conv_harness built on the CPU box
# with nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -o build/conv_harness benchmarks/conv_harness.cu):
#   bash benchmarks/gpu_candidates.sh
set -uo pipefail
MSCRED_CONV2_KERNEL=generic \
SPEC="conv2:pipe,halo2,halo2_round,halo2_noload,halo2_round_noload,halo2_nomma,halo2_round_nomma conv4:pipe,R245_10_4_1,WS245_10_4 conv3:pipe,p424_32_3_2,p424_noload,p424_nomma,p424_noepi,X424_1_3_2,X244_2_3_1,X248_4_4_1,X2410_5_4_1" \
TAIL_BATCHES="1 7 132 643" TAIL_N="5 16 17 29" NCU_VARIANTS="halo2_round,WS245_10_4,X2410_5_4_1" \
NCU_KERNELS="conv_halo3x3s2|conv_patch_ws|conv_patch_pad" bash benchmarks/gpu_conv_probe.sh
