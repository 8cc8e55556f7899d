#!/usr/bin/env bash
# One device call (~5 min), written 2026-12-05 without device time, for the next session: levels 1-2's gate weight
# cast whole by the weight cache, its input and recurrent halves views of it (ops/weight_cache.py's "xh" target,
# MSCRED_LSTM_WHOLE_WEIGHT=1, opt-in until this call measures it). It removes the four concatenations of the whole
# weight (2.0 + 2.4 us forward, 6.0 + 3.7 us backward, on the chain, in results/next_1206/timeline/) and adds three
# small copies of a half (the first step's input convolutions, forward and backward, which cuDNN takes alone).
#   1. the GPU tests of the weight cache and of the switch (the bf16 model at n = 30 finds the whole weight at levels
#      1-2, the same loss and gradients as off) -> NAME/gpu_tests.txt; the graphed full-size training steps of
#      tests/test_train.py with it on -> NAME/gpu_tests_train.txt
#   2. the graphed bf16 step with the switch 0 / 1 in alternation, 4 rounds -> NAME/env_ab.md
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_whole_weight.sh NAME
set -uo pipefail
NAME=${1:-whole_weight}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_whole_weight.py tests/test_weight_cache.py \
  tests/test_weight_transpose.py
MSCRED_LSTM_WHOLE_WEIGHT=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests_train.txt" 150 \
  tests/test_train.py -k "cuda_graph_full_size"
echo "tests done at ${SECONDS}s"
timeout 150 python3 benchmarks/env_ab.py --var MSCRED_LSTM_WHOLE_WEIGHT --values 0,1 --rounds 4 --out "$D" \
  > "$D/ab_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -3 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
