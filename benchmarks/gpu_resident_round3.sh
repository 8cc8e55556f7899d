#!/usr/bin/env bash
# One device call (~9 min): the window-resident ConvLSTM kernel as the product ships it (12 warps at 32 channels, 8 at
# 64; no branch per gate load or h store):
#   1. the GPU test suite but the im2col build group (unchanged; gpu_suite_parallel.sh)  -> gpu_suite/*.txt
#   2. each level alone, the three paths in one process (bench_resident_lstm.py)         -> resident_lstm.{md,json}
#   3. the whole model against the previous product (MSCRED_RESIDENT_LSTM=0), one run each (bench_train.py's graphed
#      bf16 part)                                                                          -> triton_3.md, resident_3.md
# Writes $OUT/resident_round3.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_round3)
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
GPU_SUITE_PACK=0 OUT="$D" bash benchmarks/gpu_suite_parallel.sh convlstm triton_ops train_im2col rest
bench_to_log "$D" 150 benchmarks/bench_resident_lstm.py
grep -E "^\| (scoring|1,024|batch)" "$D/resident_lstm.md"
OUT="$D" bash benchmarks/gpu_train_variants.sh . "triton_3:g-fused-bf16:MSCRED_RESIDENT_LSTM=0" "resident_3:g-fused-bf16"
(cd "$OUT" && tar czf resident_round3.tgz resident_round3 && rm -rf resident_round3)
