#!/usr/bin/env bash
# One device call (~4 min; run on 2026-11-30, results/resident_pair/: not adopted): the resident ConvLSTM kernel's
# two-tile units (MSCRED_RESIDENT_PAIR=1: each weight fragment feeds two tiles' MMAs, 8 warps on both levels) against
# the default:
#   1. the resident kernel's GPU tests with the default build and, with MSCRED_RESIDENT_LSTM_FLAGS set, the pair
#      build (the tests build the extension the environment names)                      -> gpu_tests_{default,pair}.txt
#   2. each level alone, both builds (bench_resident_lstm.py; the pair build's errors against the per-step output
#      are in its table)                                                                  -> default/, pair/
#   3. the whole model, the faster build against the other, one run each (bench_train.py's graphed bf16 part)
#                                                                                         -> default_1.md, pair_1.md
# Writes $OUT/resident_pair.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_pair)
PAIR="-DMSCRED_RESIDENT_PAIR=1"
build_resident "$D" "" "$PAIR"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_default.txt" 150 tests/test_resident_lstm.py
MSCRED_RESIDENT_LSTM_FLAGS="$PAIR" bash benchmarks/gpu_pytest.sh "$D/gpu_tests_pair.txt" 150 tests/test_resident_lstm.py
timeout 100 python3 benchmarks/bench_resident_lstm.py --timed "resident,per step" --out "$D/default" > "$D/default_log.txt" 2>&1
MSCRED_RESIDENT_LSTM_FLAGS="$PAIR" timeout 100 python3 benchmarks/bench_resident_lstm.py --timed resident \
  --out "$D/pair" > "$D/pair_log.txt" 2>&1
for v in default pair; do echo "== $v"; grep -E "^\| (scoring|1,024|batch)" "$D/$v/resident_lstm.md"; done
OUT="$D" bash benchmarks/gpu_train_variants.sh . "default_1:g-fused-bf16" \
  "pair_1:g-fused-bf16:MSCRED_RESIDENT_LSTM_FLAGS=$PAIR"
(cd "$OUT" && tar czf resident_pair.tgz resident_pair && rm -rf resident_pair)
