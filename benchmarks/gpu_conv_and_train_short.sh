#!/usr/bin/env bash
# One short device call (<= ~240 s) for a session with little device time left: the records of both speed issues.
#   1. bench_conv.py (issue 7): builds the im2col extension, checks every provider, times the four encoder layers
#      (-> $OUT/conv.{md,json,log}); its GPU tests are gpu_im2col.sh's (or a saved run of them).
#   2. GPU tests of the fused model's changes (small-channel conv, fused ConvLSTM at every level shape incl. the
#      padded-copy levels, 50-step loss curves) (-> $OUT/train/gpu_tests.txt)
#   3. bench_train.py --only eager,g-fused-bf16,g-fused (issue 3) (-> $OUT/train/train.{md,json}, train_log.txt)
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_conv_and_train_short.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/train"
mkdir -p "$D"
timeout 110 python3 benchmarks/bench_conv.py --out "$OUT" > "$OUT/conv.log" 2>&1
echo "bench_conv exit code $?" >> "$OUT/conv.log"
tail -4 "$OUT/conv.log"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 80 tests/test_ops_triton_small_conv.py \
  tests/test_ops_triton_convlstm.py tests/test_ops_triton_train.py -k "full_size or fifty"
timeout 125 python3 benchmarks/bench_train.py --out "$D" --work /tmp/bench_train_work --budget-s 120 --iters 20 \
  --no-graph-profile --no-compile --only eager,g-fused-bf16,g-fused > "$D/train_log.txt" 2>&1
echo "bench_train exit code $?" >> "$D/train_log.txt"
grep -E "^\| (reference eager|fused)|^part |FAILED|exit code" "$D/train_log.txt" | head -30
