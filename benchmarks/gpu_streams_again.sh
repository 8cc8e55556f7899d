#!/usr/bin/env bash
# One device call (~8 min): two opt-in layouts measured again against today's default (levels 1-2 concatenated,
# deconv1's taps-in-N weight gradient; graphed step 2.91 ms of kernel time, results/small_conv_confirm/).
#   - MSCRED_LEVEL_STREAMS=1: the four levels on side CUDA streams. Last measured when the step took 4.3 ms
#     (4.42 vs 4.32 ms, results/level_streams/); levels 3-4's convolutions fill 64-128 CTAs and their cell kernels
#     are short, so with the faster kernels since, more of the step may be under-filled launches that could overlap.
#   - MSCRED_LSTM_CONCAT_MIN_PIXELS=64: level 3 concatenated too (its convolutions alone 0.90x forward, 0.99x
#     backward in results/concat_gates/; levels 1-2 won on the step although level 2's were 0.85x).
#   1. tests/test_level_streams.py on the GPU (streams vs one stream, the graphed step with streams) -> gpu_tests.txt
#   2. the graphed bf16 step in alternation: default, streams, level 3 concatenated, twice           -> model/
# Usage: bash benchmarks/gpu_streams_again.sh. Writes $OUT/streams_again.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir streams_again)
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 100 tests/test_level_streams.py
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "def_1:g-fused-bf16" \
  "streams_1:g-fused-bf16:MSCRED_LEVEL_STREAMS=1" "concat3_1:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=64" \
  "def_2:g-fused-bf16" "streams_2:g-fused-bf16:MSCRED_LEVEL_STREAMS=1" \
  "concat3_2:g-fused-bf16:MSCRED_LSTM_CONCAT_MIN_PIXELS=64"
(cd "$OUT" && tar czf streams_again.tgz streams_again && rm -rf streams_again)
