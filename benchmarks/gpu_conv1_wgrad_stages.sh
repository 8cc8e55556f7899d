#!/usr/bin/env bash
# One device call (~4 min): conv1's weight gradient (small_conv's FLAT loop) with N software-pipeline stages
# (MSCRED_SMALL_CONV_WGRAD_STAGES; unset: Triton's default 3, whose sm_90 code already copies dz, dout2 and SELU's
# output asynchronously two tiles ahead, results/wgrad_loop_stages_sm90/): the op alone at N unset, 4 and 5
# (small_conv_wgrad_alone.py), the small convolution's GPU tests at N = 4 (full size, the shared output, the tiles),
# then the graphed bf16 step with N unset / 4 / 5 in alternation, 3 rounds -> $OUT/conv1_wgrad_stages_{alone,step}.tgz
#   bash benchmarks/gpu_conv1_wgrad_stages.sh   (the knob it sets is in e9eac98's small_conv.py, reverted)
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv1_wgrad_stages_alone)
for s in "" 4 5; do
  echo "== MSCRED_SMALL_CONV_WGRAD_STAGES=${s:-unset}" >> "$D/alone.txt"
  MSCRED_SMALL_CONV_WGRAD_STAGES=$s timeout 120 python3 benchmarks/small_conv_wgrad_alone.py >> "$D/alone.txt" 2>&1
done
cat "$D/alone.txt"
for s in 4; do
  MSCRED_SMALL_CONV_WGRAD_STAGES=$s bash benchmarks/gpu_pytest.sh "$D/gpu_tests_$s.txt" 120 \
    tests/test_ops_triton_small_conv.py -k "full_size or shared_output or tile"
  tail -1 "$D/gpu_tests_$s.txt"
done
pack_result conv1_wgrad_stages_alone
AB_TIMEOUT_S=200 bash benchmarks/gpu_tests_step_ab.sh conv1_wgrad_stages_step MSCRED_SMALL_CONV_WGRAD_STAGES ",4,5" 3
