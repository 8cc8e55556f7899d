#!/usr/bin/env bash
# One device call (~8 min): the bias_act backward and the small-channel convolution's weight gradient with their
# bias sums reduced once per program (not per tile), their launch settings swept on the training step's own calls,
# and the whole step before / after in alternation; plus Nsight Compute of the backward cell kernel as it is now.
#   1. bench_bwd_tiles.py: every recorded call under every setting                       -> bwd_tiles.md, best_tiles.env
#   2. the two ops' GPU tests with the fastest settings                                   -> gpu_tests.txt
#   3. the graphed bf16 step: BEFORE (the tree in build/before/src, e.g. `git archive HEAD src | tar -x -C
#      build/before`, carried to the device), the new kernels with the old settings, and with the fastest, in
#      alternation, with one eager baseline                                                -> model/
#   4. ncu of cell_bwd_kernel, levels 1 and 3 (gpu_cell_ncu.sh's sections)                 -> ncu_cell_bwd_kernel_*.txt
# Usage: bash benchmarks/gpu_bwd_tiles.sh. Writes $OUT/bwd_tiles.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir bwd_tiles)
bench_to_log "$D" 200 benchmarks/bench_bwd_tiles.py
grep -E "^\| (bias_act|small_conv) \|" "$D/bwd_tiles.md" | sort -t'|' -k4 -n | head -12 || tail -20 "$D/bench_log.txt"
BEST=$(paste -sd, "$D/best_tiles.env" 2>/dev/null)
echo "fastest: ${BEST:-none}"
env $(cat "$D/best_tiles.env" 2>/dev/null) bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 \
  tests/test_ops_triton_bias_act.py tests/test_ops_triton_small_conv.py
SPECS=()
[ -d build/before/src ] && SPECS+=("before_1:g-fused-bf16:PYTHONPATH=build/before/src")
SPECS+=("new_old_settings:g-fused-bf16")
[ -n "$BEST" ] && SPECS+=("new_best_1:g-fused-bf16:$BEST")
[ -d build/before/src ] && SPECS+=("before_2:g-fused-bf16:PYTHONPATH=build/before/src")
[ -n "$BEST" ] && SPECS+=("new_best_2:g-fused-bf16:$BEST")
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "${SPECS[@]}"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
S="$S --section WarpStateStats --section SourceCounters --import-source yes"
for level in "32 30" "128 8"; do
  ch=${level% *}
  timeout 100 ncu $S -k regex:cell_bwd_kernel --launch-skip 12 -c 1 python3 benchmarks/profile_train_level.py $level \
    > "$D/ncu_cell_bwd_kernel_$ch.txt" 2>&1
  echo "ncu $ch exit $?"; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Mem Busy" \
    "$D/ncu_cell_bwd_kernel_$ch.txt" | head -6
done
(cd "$OUT" && tar czf bwd_tiles.tgz bwd_tiles && rm -rf bwd_tiles)
