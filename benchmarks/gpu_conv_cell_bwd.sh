#!/usr/bin/env bash
# One device call (~3-7 min): the backward step kernel of level 1 (ops/conv_cell/conv_cell_bwd.cu, opt-in
# MSCRED_LSTM_CONV_CELL_BWD=1), written after the 2026-12-02 session's device time was spent -- its first GPU run.
#   0. both extensions built once (the forward's and the backward's)          -> build_0.txt, build_backward.txt
#   1. the kernels' GPU tests: the backward's against the float64 oracle within twice the split path's error
#      and in a model training step (tests/test_conv_cell.py, with the forward kernel's)                -> gpu_tests.txt
#   2. bench_conv_cell_bwd.py: convlstm_concat.backward at level 1, split path against the kernel, outputs compared
#                                                                                                -> conv_cell_bwd.md
#   3. if the tests passed and the kernel is faster (and CONV_CELL_BWD_STEP is not 0): the graphed bf16 step, the
#      default against MSCRED_LSTM_CONV_CELL_BWD=1 in alternation twice, the training tests with it   -> model/*.md
# Usage: bash benchmarks/gpu_conv_cell_bwd.sh. Writes $OUT/conv_cell_bwd.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir conv_cell_bwd)
build_conv_cell "$D" ""  # (the 2026-12-02 run named the backward's log build_backward.txt)
tail -n 3 "$D/build_0.txt" "$D/build_0_backward.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_conv_cell.py
grep -E "^(FAILED|ERROR)|Error" "$D/gpu_tests.txt" | head -10 | cut -c1-300
bench_to_log "$D" 120 benchmarks/bench_conv_cell_bwd.py
grep -E "^\| (split|kernel) " "$D/conv_cell_bwd.md" | cut -c1-220; grep -E "Error|error" "$D/bench_log.txt" | tail -5
FASTER=$(python3 -c "import json; r = json.load(open('$D/conv_cell_bwd.json'))['rows']; \
print(int(len(r) == 2 and r[1]['vs_split'] > 1 and r[1]['rel_diff'] < 0.05))" 2>/dev/null)
if grep -q "pytest exit code 0" "$D/gpu_tests.txt" && [ "${FASTER:-0}" = 1 ] && [ "${CONV_CELL_BWD_STEP:-1}" != 0 ]; then
  OUT="$D" bash benchmarks/gpu_setting_ab.sh model bwd "MSCRED_LSTM_CONV_CELL_BWD=1" 200 tests/test_train.py
  grep -h "train fused + CUDA graph" "$D/model/log.txt"
fi
(cd "$OUT" && tar czf conv_cell_bwd.tgz conv_cell_bwd && rm -rf conv_cell_bwd)
