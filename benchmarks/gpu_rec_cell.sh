#!/usr/bin/env bash
# Levels 3-4's recurrent convolution with the cell update in its epilogue (ops/triton/convlstm_rec_cell.py).
#   bash benchmarks/gpu_rec_cell.sh sweep   (~3-4 min) bench_rec_cell.py: each level's training forward, split path
#                                           against the fused step at each tile -> $OUT/rec_cell_train/rec_cell.md
#                                           and .json;
#                                           then its GPU tests (bf16 at the training batch) -> gpu_tests.txt
#   bash benchmarks/gpu_rec_cell.sh step    (~5 min) the graphed bf16 step, the defaults against the split path
#                                           (MSCRED_LSTM_REC_CELL=0) in alternation twice, then the GPU tests of the
#                                           fused step and the ConvLSTM's full-size rows (gpu_setting_ab.sh, the
#                                           tests under the split setting: the fused step's own set it)
#                                           -> $OUT/rec_cell_step/
# At ee4e912 a third mode, "bwd", swept and A/B'd the backward kernel of the same kind (results/rec_cell_bwd/: it lost,
# and was removed with this mode).
set -uo pipefail
. benchmarks/device_env.sh
case ${1:-sweep} in
  sweep)
    D=$(result_dir rec_cell_train)
    bench_to_log "$D" 260 benchmarks/bench_rec_cell.py
    tail -30 "$D/bench_log.txt"
    MSCRED_LSTM_REC_CELL=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_rec_cell.py \
      tests/test_ops_triton_convlstm.py -k "rec_cell or full_size_on_gpu or bf16"
    ;;
  step)  # the defaults (the fused step at levels 3-4 since 2026-12-03) against the split path, MSCRED_LSTM_REC_CELL=0
    bash benchmarks/gpu_setting_ab.sh rec_cell_step split MSCRED_LSTM_REC_CELL=0 100 \
      tests/test_ops_triton_rec_cell.py tests/test_ops_triton_convlstm.py -k "rec_cell or full_size_on_gpu"
    grep -h "train fused + CUDA graph" "$OUT/rec_cell_step/log.txt" | head
    ;;
esac
