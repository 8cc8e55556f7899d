#!/usr/bin/env bash
# One device call (~5 min): what gpu_small_conv_gather.sh left unchecked, and the new default's profile. Its first
# run (2026-12-01) found float32's taps-in-N tile over the H200's shared memory (4 tests failed, OutOfResources);
# run again after the fix (df02b47: the tile halves until it fits), results/small_conv_confirm/.
#   1. the small-conv GPU tests it did not reach within its cap: full-size rows, the taps-in-N form, opcheck -> gpu_tests.txt
#   2. profile_train_step.py with the defaults (levels 1-2 concatenated, deconv1's taps-in-N weight gradient) -> profile/
# Usage: bash benchmarks/gpu_small_conv_confirm.sh. Writes $OUT/small_conv_confirm.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir small_conv_confirm)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_ops_triton_small_conv.py \
  -k "full_size or taps or opcheck or shared_output or bordered"
bench_to_log "$D/profile" 150 benchmarks/profile_train_step.py
grep -E "^## |us  \[" "$D/profile/train_step_profile.txt" | head -30
(cd "$OUT" && tar czf small_conv_confirm.tgz small_conv_confirm && rm -rf small_conv_confirm)
