#!/usr/bin/env bash
# One device call (~4-5 min): levels 3-4's fused recurrent step in graphed bf16 scoring against the defaults
# (training only), alternating in one process (bench_rec_cell_scoring.py) -> $OUT/rec_cell_scoring/; then the fused
# step's tests and the fused ConvLSTM's full-size GPU rows with it on in scoring too (MSCRED_LSTM_REC_CELL=128,256)
# -> gpu_tests.txt.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir rec_cell_scoring)
bench_to_log "$D" 240 benchmarks/bench_rec_cell_scoring.py
tail -16 "$D/bench_log.txt"
MSCRED_LSTM_REC_CELL=128,256 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 tests/test_ops_triton_rec_cell.py \
  tests/test_ops_triton_convlstm.py -k "rec_cell or full_size_on_gpu"
