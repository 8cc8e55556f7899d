#!/usr/bin/env bash
# One device call (~3 min): Nsight Compute on the window-resident ConvLSTM kernel (ops/resident_lstm) at the scoring
# batch (3,591 sliding windows), levels 1 (32 channels, 30 x 30) and 2 (64, 15 x 15): where its time goes (warp
# stall reasons, pipe utilisation, per-SASS-instruction stall samples). Writes $OUT/resident_ncu/ncu_<ch>.txt (the
# sections) and sass_<ch>.csv (the source page: every SASS instruction with its samples), as one .tgz.
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/resident_ncu"; mkdir -p "$D"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --section SourceCounters"
python3 benchmarks/profile_window_lstm.py 32 30 > /dev/null 2>&1  # builds the extension outside the profiler
for level in "32 30" "64 15"; do
  set -- $level
  timeout 200 ncu $SECTIONS -k regex:window_lstm_resident --launch-skip 1 -c 1 -o "$D/rep_$1" -f \
    python3 benchmarks/profile_window_lstm.py "$1" "$2" > "$D/ncu_log_$1.txt" 2>&1
  echo "level $1: ncu exit $?"
  ncu -i "$D/rep_$1.ncu-rep" --print-details all > "$D/ncu_$1.txt" 2>&1
  ncu -i "$D/rep_$1.ncu-rep" --page source --csv --print-source sass > "$D/sass_$1.csv" 2>&1
  rm -f "$D/rep_$1.ncu-rep"
done
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|Stall|No Eligible" "$D"/ncu_*.txt | head -60
(cd "$OUT" && tar czf resident_ncu.tgz resident_ncu && rm -rf resident_ncu)
