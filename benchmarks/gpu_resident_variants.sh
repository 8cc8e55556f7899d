#!/usr/bin/env bash
# One device call (~8 min): the window-resident ConvLSTM kernel's compile-time switches (MSCRED_RESIDENT_LSTM_FLAGS:
# warps per block, bf16 rounding of the pre-activations, activations two at a time on tanh.approx.f16x2), each
# variant built in parallel first, then timed alone at the scoring batch, 1,024 windows and batch 128 with its
# errors (bench_resident_lstm.py --timed resident); and Nsight Compute on the default build, level 1 at the scoring
# batch (stall reasons, per-SASS-instruction samples). Writes $OUT/resident_variants.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_variants)
VARIANTS=(
  ""
  "-DMSCRED_RESIDENT_ROUND_GATES=0"
  "-DMSCRED_RESIDENT_ROUND_GATES=0 -DMSCRED_RESIDENT_HALF_TANH=1"
  "-DMSCRED_RESIDENT_WARPS=12 -DMSCRED_RESIDENT_ROUND_GATES=0"
  "-DMSCRED_RESIDENT_WARPS=12 -DMSCRED_RESIDENT_ROUND_GATES=0 -DMSCRED_RESIDENT_HALF_TANH=1"
  "-DMSCRED_RESIDENT_WARPS=16 -DMSCRED_RESIDENT_ROUND_GATES=0 -DMSCRED_RESIDENT_HALF_TANH=1"
)
build_resident "$D" "${VARIANTS[@]}"
echo "built"
for i in "${!VARIANTS[@]}"; do
  MSCRED_RESIDENT_LSTM_FLAGS="${VARIANTS[$i]}" timeout 100 python3 benchmarks/bench_resident_lstm.py \
    --timed resident --out "$D/v$i" > "$D/v${i}_log.txt" 2>&1
  echo "variant $i (${VARIANTS[$i]:-defaults}): exit $?"
  grep -E "^\| (scoring|1,024|batch)" "$D/v$i/resident_lstm.md"
done
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section SourceCounters"
timeout 150 ncu $SECTIONS -k regex:window_lstm_resident --launch-skip 1 -c 1 -o "$D/rep32" -f \
  python3 benchmarks/profile_window_lstm.py 32 30 > "$D/ncu_log.txt" 2>&1
echo "ncu exit $?"
ncu -i "$D/rep32.ncu-rep" --print-details all > "$D/ncu_32.txt" 2>&1
ncu -i "$D/rep32.ncu-rep" --page source --csv --print-source sass > "$D/sass_32.csv" 2>&1
rm -f "$D/rep32.ncu-rep"
grep -E "Duration|Throughput|Issue Slots|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall" "$D/ncu_32.txt" | head -40
(cd "$OUT" && tar czf resident_variants.tgz resident_variants && rm -rf resident_variants)
