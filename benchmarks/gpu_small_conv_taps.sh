#!/usr/bin/env bash
# One device call (~8 min): deconv1's forward with the taps beside the output channels (small_conv_taps.py) on the
# H200. (The call's first version, with bench_train.py's graphed part per setting, is in results/small_conv_taps/.)
#   1. GPU tests of the small-channel convolution's forward forms, full size too -> NAME/gpu_tests.txt
#   2. bench_small_conv_taps.py: the model's deconv1 calls (scoring, training), taps vs generic
#      -> NAME/small_conv_taps.md
#   3. env_ab.py: the graphed bf16 training step, MSCRED_SMALL_CONV_FWD_TAPS=0 / 1 in alternation -> NAME/env_ab.md
#   4. bench_rec_cell_scoring.py --var MSCRED_SMALL_CONV_FWD_TAPS: graphed bf16 shared-segment scoring, taps /
#      generic in alternation -> NAME/rec_cell_scoring.md
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_small_conv_taps.sh NAME
set -uo pipefail
NAME=${1:-small_conv_taps}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-300}" tests/test_ops_triton_small_conv.py \
  -k "taps or full_size or bordered or opcheck or small_sizes"
echo "tests done at ${SECONDS}s"
timeout 150 python3 benchmarks/bench_small_conv_taps.py --out "$D" > "$D/taps_log.txt" 2>&1
echo "taps bench exit $? at ${SECONDS}s"; tail -6 "$D/small_conv_taps.md"
timeout 200 python3 benchmarks/env_ab.py --var MSCRED_SMALL_CONV_FWD_TAPS --values 0,1 --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -5 "$D/env_ab.md"
timeout 240 python3 benchmarks/bench_rec_cell_scoring.py --var MSCRED_SMALL_CONV_FWD_TAPS --values 1,0 --rounds 3 \
  --out "$D" > "$D/scoring_log.txt" 2>&1
echo "scoring A/B exit $? at ${SECONDS}s"; tail -8 "$D/rec_cell_scoring.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
