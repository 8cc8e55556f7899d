#!/usr/bin/env bash
# The call of 2026-12-02 (results/cell_math/, ~8 min): the cell kernels' activations on the SFU (FAST_ACT,
# MUFU.TANH) against the exact forms -- bench_cell_math.py's activation rows (it had only the first two then), the
# GPU tests that run bf16 training at full size (the SFU path by default) with the SFU-against-exact accuracy rows,
# and the graphed bf16 step in alternation, exact (MSCRED_LSTM_FAST_ACT=0) and SFU, twice.
# Usage: bash benchmarks/gpu_cell_math.sh. Writes $OUT/cell_math.tgz.
exec bash benchmarks/gpu_cell_call.sh cell_math activations 150 150 \
  "sfu or half_cell or concatenated_gates_in_bf16 or test_full_size_on_gpu" \
  "exact_1:g-fused-bf16:MSCRED_LSTM_FAST_ACT=0" "sfu_1:g-fused-bf16" \
  "exact_2:g-fused-bf16:MSCRED_LSTM_FAST_ACT=0" "sfu_2:g-fused-bf16"
