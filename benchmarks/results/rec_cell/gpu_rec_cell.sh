#!/usr/bin/env bash
# One device call (~8 min): bf16 inference with the ConvLSTM's recurrent convolution fused into the cell update
# (rec_cell_fwd_kernel, ops/triton/convlstm_kernels.py) against cuDNN + the cell kernel:
#   1. its GPU tests and the other inference tests of the fused op and of the model's window path
#      -> $OUT/rec_cell/gpu_tests.txt
#   2. bench_rec_cell.py: each level alone, scoring batch (3,591 sliding windows) and batch 128, a tile sweep
#      -> $OUT/rec_cell/{rec_cell.md,json,best_blocks.txt}
#   3. bench_train.py's graphed bf16 part (training step, inference, end to end) with MSCRED_FUSED_REC=0 and =1
#      (the sweep's best tile) -> $OUT/rec_cell/{off,on}.md (gpu_train_variants.sh)
# Usage (repository root, CUDA machine): bash benchmarks/gpu_rec_cell.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
D="$OUT/rec_cell"; mkdir -p "$D"
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/mscred_pycache
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 tests/test_ops_triton_convlstm.py tests/test_forward_windows.py \
  -k "fused_recurrent or inference or full_size or graph or window"
{
  bash benchmarks/machine_info.sh
  timeout 200 python3 benchmarks/bench_rec_cell.py --out "$D"
  echo "bench_rec_cell exit $?"
} > "$D/bench_log.txt" 2>&1
grep -A30 "^Best tile" "$D/bench_log.txt"
BLOCKS=$(cat "$D/best_blocks.txt" 2>/dev/null || echo "64/64/64/4/3")
echo "A/B tile: $BLOCKS"
PART_TIMEOUT_S=60 bash benchmarks/gpu_train_variants.sh rec_cell "off:g-fused-bf16:MSCRED_FUSED_REC=0" \
  "on:g-fused-bf16:MSCRED_FUSED_REC=1,MSCRED_REC_CELL_BLOCKS=$BLOCKS"
