#!/usr/bin/env bash
# One device call (~4-7 min): the CUDA conv + cell step kernel of levels 1-2 (ops/conv_cell, MSCRED_LSTM_CONV_CELL=1).
#   0. the extension built once (its log in build.txt), so the steps after it find it
#   1. its GPU tests: the training op forward and backward against the float64 oracle within twice the split
#      path's error, poisoned buffers, awkward sizes; the step outputs against the split path, a graph replay
#                                                                                               -> gpu_tests.txt
#   2. bench_conv_cell.py: convlstm_concat.forward at levels 1 and 2, split path against the kernel  -> conv_cell.md
#   3. if the kernel is faster over both levels and CONV_CELL_STEP is not 0: the graphed bf16 step, the default
#      against it in alternation twice, then the training tests with it (gpu_setting_ab.sh)      -> model/*.md
# Usage: bash benchmarks/gpu_conv_cell_cuda.sh. Writes $OUT/conv_cell_cuda.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_cuda)
MSCRED_LSTM_CONV_CELL=1 timeout 240 python3 -c "from mscred.ops import conv_cell; conv_cell._extension()" \
  > "$D/build.txt" 2>&1; echo "build exit $?"; tail -5 "$D/build.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_conv_cell.py
grep -E "^(FAILED|ERROR)|Error|assert" "$D/gpu_tests.txt" | head -20 | cut -c1-300
bench_to_log "$D" 150 benchmarks/bench_conv_cell.py
grep -E "^\| [12] " "$D/conv_cell.md" | cut -c1-260; grep -E "sums|Error|error" "$D/bench_log.txt" | tail -5
BEST=$(paste -sd, "$D/faster.env" 2>/dev/null)
echo "faster: ${BEST:-no}"
if [ -n "$BEST" ] && [ "${CONV_CELL_STEP:-1}" != 0 ]; then
  OUT="$D" bash benchmarks/gpu_setting_ab.sh model kernel "$BEST" 240 tests/test_train.py tests/test_conv_cell.py
  grep -h "train fused + CUDA graph" "$D/model/log.txt"
fi
(cd "$OUT" && tar czf conv_cell_cuda.tgz conv_cell_cuda && rm -rf conv_cell_cuda)
