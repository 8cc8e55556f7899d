#!/usr/bin/env bash
# One device call (~4 min): where the resident kernel's attention epilogue spends its ~16 us per window (measured on
# the mma.sync build, results/lstm_attention_batched/; it ran on the wgmma build, results/attention_ncu/). Nsight
# Compute on the resident kernel with the attention (level 1, all 3,591 windows of scoring, the second call), built
# with -lineinfo so that the stall samples map to source lines:
#   ncu_32.txt (sections), source_32.csv.gz (per-SASS-instruction samples with their source lines),
#   summary.md (ncu_source_summary.py: the source lines with the most samples and their stall reasons)
# Writes $OUT/attention_ncu.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir attention_ncu)
export MSCRED_RESIDENT_LSTM_FLAGS="-lineinfo"
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section SourceCounters"
timeout 200 ncu $SECTIONS -k regex:window_lstm_resident --launch-skip 1 -c 1 -o "$D/rep32" -f \
  python3 benchmarks/profile_window_lstm.py 32 30 --attention > "$D/ncu_log.txt" 2>&1
echo "ncu exit $?"
ncu -i "$D/rep32.ncu-rep" --print-details all > "$D/ncu_32.txt" 2>&1
ncu -i "$D/rep32.ncu-rep" --page source --csv --print-source cuda,sass > "$D/source_32.csv" 2>&1
rm -f "$D/rep32.ncu-rep"
python3 benchmarks/ncu_source_summary.py "$D/source_32.csv" --top 20 > "$D/summary.md" 2>&1
gzip "$D/source_32.csv"
grep -E "Duration|L2 Hit|Issue Slots|Warp Cycles Per Issued|No Eligible" "$D/ncu_32.txt" | head -20
head -40 "$D/summary.md"
(cd "$OUT" && tar czf attention_ncu.tgz attention_ncu && rm -rf attention_ncu)
