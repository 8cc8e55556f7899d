#!/usr/bin/env bash
# One device call (~4 min): bias_act's forward kernel, where its time goes (docs/kernel-experiments.md, the bias_act
# lead). bench_bias_act_fwd.py times every launch variant (tile x runtime / constant map sizes) on the model's six
# call shapes, then Nsight Compute profiles one launch of the scoring conv2 shape and of the training conv2 shape
# with the default tile, the 2048 / 8 tile (8 elements, one 16-byte load a thread) and the constant sizes.
# Usage: bash benchmarks/gpu_bias_act_fwd.sh. Writes $OUT/bias_act_fwd.tgz.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir bias_act_fwd)
bench_to_log "$D" 200 benchmarks/bench_bias_act_fwd.py
grep -E "^\| " "$D/bias_act_fwd.md" | head -50
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
S="$S --section WarpStateStats"
for spec in "0 default" "0 tile2048 MSCRED_BIAS_ACT_FWD_TILE=2048/8" "0 const MSCRED_BIAS_ACT_CONST_SIZES=1" \
            "3 default" "3 tile2048 MSCRED_BIAS_ACT_FWD_TILE=2048/8" "3 const MSCRED_BIAS_ACT_CONST_SIZES=1"; do
  read -r shape label vars <<< "$spec"
  env $vars timeout 100 ncu $S -k regex:_bias_act_fwd --launch-skip 5 -c 1 \
    python3 benchmarks/bench_bias_act_fwd.py --launch "$shape" > "$D/ncu_${shape}_$label.txt" 2>&1
  echo "== shape $shape $label: ncu exit $? at ${SECONDS}s"
  grep -E "^    (Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued Instruction|Issue Slots Busy)" \
    "$D/ncu_${shape}_$label.txt" | head -8
done
(cd "$OUT" && tar czf bias_act_fwd.tgz bias_act_fwd && rm -rf bias_act_fwd)
