#!/usr/bin/env bash
# The call of 2026-12-02 (results/cell_bytes/, ~8 min): the backward cell kernel's bytes, on top of the SFU
# activations -- bench_cell_math.py's activation rows (exact / SFU / SFU + c_t recomputed / + the running dc in
# bf16), the GPU tests of bf16 / float32 training at full size with the SFU and recompute rows, and the graphed bf16
# step in alternation, c_t read (MSCRED_LSTM_RECOMPUTE_C=0) and recomputed, twice.
# Usage: bash benchmarks/gpu_cell_bytes.sh. Writes $OUT/cell_bytes.tgz.
exec bash benchmarks/gpu_cell_call.sh cell_bytes activations 170 150 \
  "sfu or half_cell or concatenated_gates_in_bf16 or test_full_size_on_gpu or recomputed" \
  "readc_1:g-fused-bf16:MSCRED_LSTM_RECOMPUTE_C=0" "recompute_1:g-fused-bf16" \
  "readc_2:g-fused-bf16:MSCRED_LSTM_RECOMPUTE_C=0" "recompute_2:g-fused-bf16"
