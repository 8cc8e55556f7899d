#!/usr/bin/env bash
# One device call (~6 min): the resident kernel's recurrent GEMM on Hopper's warpgroup MMA (-DMSCRED_RESIDENT_WGMMA=1,
# wgmma.h: 64-pixel units per warpgroup, the weight read by the tensor cores from shared memory) against the default
# mma.sync build.
#   1. GPU tests with the wgmma build: the resident kernel's and the fused attention's (float64 oracle at every
#      shape, 1-5 steps, blocks past twice the SM count, graphs)                      -> gpu_tests_wgmma.txt
#      and the default build's opcheck test (fixed after results/epilogue_variants/)  -> gpu_tests_default.txt
#   2. each level alone, in alternation: default, wgmma, default, wgmma: with its attention (bench_lstm_attention.py,
#      one kernel) and without (bench_resident_lstm.py, resident)     -> {attention,plain}_{default,wgmma}_{1,2}/
#   3. the whole model (graphed bf16, gpu_train_variants.sh) in alternation: default, wgmma, default -> model/
# Writes $OUT/resident_wgmma.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_wgmma)
WG="-DMSCRED_RESIDENT_WGMMA=1"
build_resident "$D" "" "$WG"
echo "built at ${SECONDS}s"
MSCRED_RESIDENT_LSTM_FLAGS="$WG" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_wgmma.txt" 150 \
  tests/test_resident_lstm.py tests/test_lstm_attention.py
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_default.txt" 60 tests/test_lstm_attention.py -k opcheck
echo "tested at ${SECONDS}s"
for i in 1 2; do
  bench_level "$D" "attention_default_$i" "" bench_lstm_attention.py "one kernel"
  bench_level "$D" "attention_wgmma_$i" "$WG" bench_lstm_attention.py "one kernel"
done
bench_level "$D" plain_default_1 "" bench_resident_lstm.py resident
bench_level "$D" plain_wgmma_1 "$WG" bench_resident_lstm.py resident
OUT="$D" PART_TIMEOUT_S=40 bash benchmarks/gpu_train_variants.sh model "default_1:g-fused-bf16" \
  "wgmma_1:g-fused-bf16:MSCRED_RESIDENT_LSTM_FLAGS=$WG" "default_2:g-fused-bf16"
(cd "$OUT" && tar czf resident_wgmma.tgz resident_wgmma && rm -rf resident_wgmma)
