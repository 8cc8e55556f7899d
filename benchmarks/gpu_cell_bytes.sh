#!/usr/bin/env bash
# One device call (~8 min): the backward cell kernel's bytes, on top of the SFU activations (results/cell_math/).
#   1. bench_cell_math.py: per level, exact / SFU / SFU + c_t recomputed / + the running dc in bf16: the cell kernels'
#      time, the level's graphed fwd / bwd, h and every gradient against float64                 -> cell_bytes/bench/
#   2. the fused ConvLSTM's GPU tests of bf16 / float32 training at full size, the SFU and recompute rows
#                                                                                                  -> gpu_tests.txt
#   3. the graphed bf16 step in alternation, c_t read (MSCRED_LSTM_RECOMPUTE_C=0) and recomputed, twice -> model/
# Usage: bash benchmarks/gpu_cell_bytes.sh. Writes $OUT/cell_bytes.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir cell_bytes)
bench_to_log "$D/bench" 170 benchmarks/bench_cell_math.py
tail -18 "$D/bench/bench_log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_ops_triton_convlstm.py \
  -k "sfu or half_cell or concatenated_gates_in_bf16 or test_full_size_on_gpu or recomputed"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model \
  "readc_1:g-fused-bf16:MSCRED_LSTM_RECOMPUTE_C=0" "recompute_1:g-fused-bf16" \
  "readc_2:g-fused-bf16:MSCRED_LSTM_RECOMPUTE_C=0" "recompute_2:g-fused-bf16"
(cd "$OUT" && tar czf cell_bytes.tgz cell_bytes && rm -rf cell_bytes)
