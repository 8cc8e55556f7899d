#!/usr/bin/env bash
# One device call (~7 min): the small-channel convolution's weight gradient in its taps-in-N form
# (ops/triton/small_conv.py, taps_in_n: deconv1's x read once, dz gathered at every tap's shift) against the
# per-tap form it replaced (each tap's programs reading all of x; 54 us of the 3.0 ms step, results/concat_levels/).
#   1. the small-conv GPU tests                                                          -> gpu_tests.txt
#   2. bench_small_conv_wgrad.py: deconv1's call under the per-tap form and every taps-in-N setting -> sweep/
#   3. the graphed bf16 step in alternation: per-tap, taps-in-N at the sweep's fastest setting, twice -> model/
# Usage: bash benchmarks/gpu_small_conv_gather.sh. Writes $OUT/small_conv_gather.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir small_conv_gather)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 tests/test_ops_triton_small_conv.py
bench_to_log "$D/sweep" 150 benchmarks/bench_small_conv_wgrad.py
tail -4 "$D/sweep/small_conv_wgrad.md"
BEST=$(cat "$D/sweep/best_gather.env" 2>/dev/null || echo "MSCRED_SMALL_CONV_WGRAD_GATHER_TILE=128/4/2")
echo "taps-in-N setting for the step: $BEST"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model \
  "pertap_1:g-fused-bf16:MSCRED_SMALL_CONV_WGRAD_GATHER=0" "gather_1:g-fused-bf16:$BEST" \
  "pertap_2:g-fused-bf16:MSCRED_SMALL_CONV_WGRAD_GATHER=0" "gather_2:g-fused-bf16:$BEST"
(cd "$OUT" && tar czf small_conv_gather.tgz small_conv_gather && rm -rf small_conv_gather)
