#!/usr/bin/env bash
# One device call (~4 min): the small-conv GPU tests gpu_transpose_taps.sh did not reach within its 180 s cap
# (34 passed there: the transposes, the weight cache and the small conv's rows up to the shared-memory check), for
# the weight gradient's one-copy cast: full size, opcheck, bordered and shared outputs, the fused model.
# Usage: bash benchmarks/gpu_transpose_taps_tests.sh. Writes $OUT/transpose_taps_tests.tgz.
exec bash benchmarks/gpu_pytest_call.sh transpose_taps_tests 270 tests/test_ops_triton_small_conv.py \
  -k "full_size or opcheck or bordered or shared_output or fused_model or deconv_as_conv or tile_fits"
