#!/usr/bin/env bash
# One device call (~10 min): the window-resident ConvLSTM kernel after its first profile (weight stored per k16 step
# so that every B address is a lane constant plus an immediate, input gates as 16-byte loads in the lane order and
# added in the epilogue, h and c stored 16 bytes at a time):
#   1. its GPU tests and the Triton per-window tests                               -> gpu_tests.txt
#   2. 8 and 12 warps per block, each level alone (bench_resident_lstm.py, resident timed; the first run also times
#      the Triton paths)                                                            -> w8/, w12/
#   3. the faster of the two in the whole model against the previous product (MSCRED_RESIDENT_LSTM=0), twice in
#      alternation (bench_train.py's graphed bf16 part)                             -> triton_{1,2}.md, resident_{1,2}.md
#   4. Nsight Compute on it, level 1 at the scoring batch                           -> ncu_32.txt, sass_32.csv
# Writes $OUT/resident_round2.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_round2)
declare -A FLAGS=([w8]="" [w12]="-DMSCRED_RESIDENT_WARPS=12")
for v in w8 w12; do
  MSCRED_RESIDENT_LSTM_FLAGS="${FLAGS[$v]}" timeout 240 python3 -c \
    "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build_$v.txt" 2>&1 &
done
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_resident_lstm.py tests/test_ops_triton_convlstm.py \
  tests/test_forward_windows.py -k "resident or window or sliding"
wait
MSCRED_RESIDENT_LSTM_FLAGS="" timeout 150 python3 benchmarks/bench_resident_lstm.py --out "$D/w8" > "$D/w8_log.txt" 2>&1
MSCRED_RESIDENT_LSTM_FLAGS="${FLAGS[w12]}" timeout 100 python3 benchmarks/bench_resident_lstm.py --timed resident \
  --out "$D/w12" > "$D/w12_log.txt" 2>&1
for v in w8 w12; do echo "== $v"; grep -E "^\| (scoring|1,024|batch)" "$D/$v/resident_lstm.md"; done
BEST=$(python3 - "$D" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
def total(v):
    rows = json.loads((d / v / "resident_lstm.json").read_text())["rows"]
    return sum(r["ms"]["resident"] for r in rows if r["workload"] == "scoring")
print(min(("w8", "w12"), key=total))
PY
)
echo "best: $BEST (${FLAGS[$BEST]:-defaults})"
BF="${FLAGS[$BEST]}"
bash benchmarks/gpu_train_variants.sh resident_round2 "triton_1:g-fused-bf16:MSCRED_RESIDENT_LSTM=0" \
  "resident_1:g-fused-bf16${BF:+:MSCRED_RESIDENT_LSTM_FLAGS=$BF}" "triton_2:g-fused-bf16:MSCRED_RESIDENT_LSTM=0" \
  "resident_2:g-fused-bf16${BF:+:MSCRED_RESIDENT_LSTM_FLAGS=$BF}"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section SourceCounters"
MSCRED_RESIDENT_LSTM_FLAGS="$BF" timeout 150 ncu $SECTIONS -k regex:window_lstm_resident --launch-skip 1 -c 1 \
  -o "$D/rep32" -f python3 benchmarks/profile_window_lstm.py 32 30 > "$D/ncu_log.txt" 2>&1
echo "ncu exit $?"
ncu -i "$D/rep32.ncu-rep" --print-details all > "$D/ncu_32.txt" 2>&1
ncu -i "$D/rep32.ncu-rep" --page source --csv --print-source sass > "$D/sass_32.csv" 2>&1
rm -f "$D/rep32.ncu-rep"
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued" "$D/ncu_32.txt" | head
(cd "$OUT" && tar czf resident_round2.tgz resident_round2 && rm -rf resident_round2)
