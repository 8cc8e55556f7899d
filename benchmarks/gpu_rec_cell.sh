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
  bwd)  # ~4-5 min: the backward kernel's sweep, then (if a tile beat the split path) the graphed bf16 step with it
        # against the defaults in alternation twice (bench_train.py's graphed part alone: no eager baseline); the
        # fused steps' bf16 GPU tests between the two -> $OUT/rec_cell_bwd/
    D=$(result_dir rec_cell_bwd)
    bench_to_log "$D" 150 benchmarks/bench_rec_cell.py --backward
    tail -22 "$D/bench_log.txt"
    mapfile -t BEST < <(cat "$D/best_bwd.env" 2>/dev/null)   # (one VAR=VALUE a line: the values hold commas)
    echo "fastest: ${BEST[*]:-none}"
    bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 80 tests/test_ops_triton_rec_cell.py -k "bf16"
    if [ ${#BEST[@]} -gt 0 ]; then
      W=/tmp/rec_cell_bwd; rm -rf "$W"
      for run in default_1 fused_1 default_2 fused_2; do
        envs=(); [ "${run%_*}" = fused ] && envs=("${BEST[@]}")
        mkdir -p "$W/$run"
        env "${envs[@]}" timeout 40 python3 benchmarks/bench_train.py --iters 30 --no-graph-profile --out "$W/$run" \
          --work "$W/$run" --part g-fused-bf16 2>&1 | grep -E "train fused \+ CUDA graph \+ bf16 " | sed "s/^/$run: /"
      done | tee "$D/step_ab.txt"
    fi
    ;;
esac
