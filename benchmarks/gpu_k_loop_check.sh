#!/usr/bin/env bash
# One device call (~3-4 min) after the cp.async K loop of conv_pipelined and conv_patch became one helper
# (im2col.cu: cp_async_k_loop; conv_pipelined's SASS came out identical, conv_patch's rescheduled with the same
# instruction counts): the harness's product rows against the build before the change (build/conv_harness_v0,
# carried), output checked against a direct convolution at batches 640, 7 and 643; then the CUDA tests of the
# im2col op's fast paths through PyTorch. Writes $OUT/conv_probe/{probe.txt, gpu_tests_k_loop.txt}; committed as
# results/conv_probe/probe_k_loop.txt and gpu_tests_k_loop.txt (2026-11-30): times as before within 1%, every row
# correct, 106 GPU tests passed.
set -uo pipefail
. benchmarks/device_env.sh
SPEC="conv1:pipe conv2:pipe conv3:pipe conv4:pipe,R425_5_3_2,R245_10_4_1" TAIL_BATCHES="7 643" NCU_VARIANTS= \
  bash benchmarks/gpu_conv_probe.sh
bash benchmarks/gpu_pytest.sh "$OUT/conv_probe/gpu_tests_k_loop.txt" 300 tests/test_im2col_fast_paths.py \
  tests/test_ops_im2col.py -k "not test_ops_im2col or implicit-pipe"
