#!/usr/bin/env bash
# One device call (~9 min): the cell kernels' activations on the SFU (FAST_ACT, MUFU.TANH) against the exact forms.
#   1. bench_cell_math.py: per level, the cell kernels' time and the level's graphed fwd / bwd, both variants, and
#      h and every gradient against float64                                                   -> cell_math/
#   2. the GPU tests of the fused ConvLSTM that run bf16 training at full size (the SFU path by default), and the
#      SFU-against-exact accuracy rows                                                         -> gpu_tests.txt
#   3. the graphed bf16 step in alternation, exact (MSCRED_LSTM_FAST_ACT=0) and SFU, twice     -> model/
# Usage: bash benchmarks/gpu_cell_math.sh. Writes $OUT/cell_math.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir cell_math)
bench_to_log "$D/bench" 150 benchmarks/bench_cell_math.py
tail -12 "$D/bench/bench_log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py \
  -k "sfu or half_cell or concatenated_gates_in_bf16 or test_full_size_on_gpu"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "exact_1:g-fused-bf16:MSCRED_LSTM_FAST_ACT=0" \
  "sfu_1:g-fused-bf16" "exact_2:g-fused-bf16:MSCRED_LSTM_FAST_ACT=0" "sfu_2:g-fused-bf16"
(cd "$OUT" && tar czf cell_math.tgz cell_math && rm -rf cell_math)
