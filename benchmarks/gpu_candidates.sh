#!/usr/bin/env bash
# One device call (~1-2 minutes): the two kernel candidates written on 2026-11-30 without a GPU, each timed beside
# the product's kernel for its layer in the standalone harness, checked at awkward sizes (the harness compares every
# row with a float64 reference: "ok" or "WRONG"), with the product's probes beside them:
#   * conv2: PRODUCER_ROUNDS (halo_s2.cuh, rows halo2_round*): the producers round their staged copies in place, so
#     that the consumers, the kernel's longer side, skip their TF32 conversions; against halo2 (the product).
#   * conv4: conv_patch_ws (benchmarks/conv4_ws.cuh, row WS245_10_4): a copy warp issuing bulk copies that complete on
#     mbarriers, 8 MMA warps without block barriers; against R245_10_4_1 (the product's tile) and pipe (the product's
#     dispatch).
# Also conv3's bounds (its product tile p424_32_3_2 and probes without copies / MMAs / epilogue): conv3 is
# memory-bound by bench_conv's roofline and at 0.30 of the copy bandwidth, with no kernel of its own yet.
# Adopt a candidate if it is faster at batch 640 and 643 and "ok" everywhere (then the record: gpu_conv2_halo.sh and
# bench_conv.py --timing graph, and the GPU tests); delete it otherwise, with its numbers in docs/kernel-experiments.md.
# Writes $OUT/conv_probe/{probe.txt,ncu.txt}. Usage (repository root, carry build/conv_harness built on the CPU box
# with nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -o build/conv_harness benchmarks/conv_harness.cu):
#   bash benchmarks/gpu_candidates.sh
set -uo pipefail
MSCRED_CONV2_KERNEL=generic \
SPEC="conv2:pipe,halo2,halo2_round,halo2_noload,halo2_round_noload,halo2_nomma,halo2_round_nomma conv4:pipe,R245_10_4_1,WS245_10_4 conv3:pipe,p424_32_3_2,p424_noload,p424_nomma,p424_noepi" \
TAIL_BATCHES="1 7 132 643" TAIL_N="5 16 17 29" NCU_VARIANTS="halo2_round,WS245_10_4" \
NCU_KERNELS="conv_halo3x3s2|conv_patch_ws" bash benchmarks/gpu_conv_probe.sh
