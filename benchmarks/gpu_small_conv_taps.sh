#!/usr/bin/env bash
# One device call (~9 min): deconv1's forward with the taps beside the output channels (small_conv_taps.py) and
# PackedAdam's default tile, on the H200.
#   1. GPU tests of the small-channel convolution and of PackedAdam -> NAME/gpu_tests.txt
#   2. bench_small_conv_taps.py: the model's deconv1 calls (scoring, training), taps vs generic
#      -> NAME/small_conv_taps.md
#   3. bench_packed_adam.py at the tiles around the new default -> NAME/packed_adam.md
#   4. bench_train.py's graphed bf16 part (step, inference, end to end) in alternation, twice: taps_N (the default)
#      and generic_N (MSCRED_SMALL_CONV_FWD_TAPS=0), beside one eager baseline -> NAME/model/*.md
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_small_conv_taps.sh NAME
set -uo pipefail
NAME=${1:-small_conv_taps}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_ops_triton_small_conv.py tests/test_packed_adam.py
echo "tests done at ${SECONDS}s"
timeout 150 python3 benchmarks/bench_small_conv_taps.py --out "$D" > "$D/taps_log.txt" 2>&1
echo "taps bench exit $? at ${SECONDS}s"; tail -6 "$D/small_conv_taps.md"
timeout 90 python3 benchmarks/bench_packed_adam.py --tiles 1024/4,2048/8,512/4 --out "$D" > "$D/adam_log.txt" 2>&1
echo "adam bench exit $? at ${SECONDS}s"; tail -5 "$D/packed_adam.md"
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "taps_1:g-fused-bf16" \
  "generic_1:g-fused-bf16:MSCRED_SMALL_CONV_FWD_TAPS=0" "taps_2:g-fused-bf16" \
  "generic_2:g-fused-bf16:MSCRED_SMALL_CONV_FWD_TAPS=0"
echo "variants done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
