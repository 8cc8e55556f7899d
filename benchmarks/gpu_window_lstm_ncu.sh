#!/usr/bin/env bash
# One device call (~2 min): Nsight Compute on level 1 (32 channels, 30 x 30) of bf16 inference at the scoring batch
# (3,591 sliding windows): the per-window kernel (window_lstm_kernel, two tiles; forced with MSCRED_WINDOW_LSTM=all,
# since the product's gate leaves this batch to the per-step path) against the per-step path's cell
# kernel (step 2, which reads the recurrent gates and c). Sections: SpeedOfLight, MemoryWorkloadAnalysis (HBM bytes,
# L2 hit rate), Occupancy, LaunchStats. Writes $OUT/window_lstm_ncu/{ncu_window_<tile>.txt,ncu_cell.txt}.
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/window_lstm_ncu"; mkdir -p "$D"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
for tile in ${TILES:-64/8/1/1 16/4/1/0}; do
  MSCRED_WINDOW_LSTM=all MSCRED_WINDOW_LSTM_BLOCKS="$tile" timeout 150 ncu $SECTIONS -k regex:window_lstm_kernel \
    --launch-skip 1 -c 1 python3 benchmarks/profile_window_lstm.py 32 30 > "$D/ncu_window_${tile//\//_}.txt" 2>&1
  echo "window $tile: ncu exit $?"
done
MSCRED_WINDOW_LSTM=0 timeout 150 ncu $SECTIONS -k regex:cell_fwd_kernel --launch-skip 6 -c 1 \
  python3 benchmarks/profile_window_lstm.py 32 30 > "$D/ncu_cell.txt" 2>&1
echo "cell: ncu exit $?"
MSCRED_WINDOW_LSTM=0 timeout 150 ncu $SECTIONS -k regex:xmma --launch-skip 6 -c 1 \
  python3 benchmarks/profile_window_lstm.py 32 30 > "$D/ncu_recconv.txt" 2>&1
echo "recurrent conv: ncu exit $?"
for f in "$D"/ncu_*.txt; do echo "== $f"; grep -E "^  [a-z_]+kernel|xmma|Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|Achieved Occupancy|Registers Per|Dynamic Shared|Block Limit|Theoretical Occupancy|Mem Busy|Max Bandwidth" "$f" | head -20; done
