#!/usr/bin/env bash
# One device call (~7 min): the weight transposes with a (256 x 4) tile for 4-tap blocks (ops/triton/weight_transpose.py;
# before, every block at 64 x 16: 19.0 us forward, 13.0 us backward in results/small_conv_confirm/profile/) and the
# small conv's weight gradient cast in one copy (two before).
#   1. GPU tests: the transposes, the weight cache, the small conv (every row)         -> gpu_tests.txt
#   2. profile_train_step.py with the defaults (the _transpose_kernel rows)            -> profile/
#   3. the graphed bf16 step, twice, beside the eager baselines                        -> model/
# Usage: bash benchmarks/gpu_transpose_taps.sh. Writes $OUT/transpose_taps.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir transpose_taps)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 180 tests/test_weight_transpose.py tests/test_weight_cache.py \
  tests/test_ops_triton_small_conv.py
bench_to_log "$D/profile" 100 benchmarks/profile_train_step.py
grep -E "^## |us  \[|_transpose_kernel  " "$D/profile/train_step_profile.txt" | head -40
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "def_1:g-fused-bf16" "def_2:g-fused-bf16"
(cd "$OUT" && tar czf transpose_taps.tgz transpose_taps && rm -rf transpose_taps)
