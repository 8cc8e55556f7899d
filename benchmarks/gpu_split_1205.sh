#!/usr/bin/env bash
# One device call (~9 min), written 2026-12-05 (session 53): gpu_next_1208.sh's question, and the weight gradients
# split into K calls (MSCRED_WGRAD_SPLIT=K, ops/wgrad_stream.weight_grad), alone and with node priorities.
#   1. the graphed bf16 step in one alternation, 4 rounds: the defaults / MSCRED_DECONV_DIRECT=1 /
#      MSCRED_INTERLEAVED_LEVELS=1 / both / MSCRED_WGRAD_SPLIT=2 / =4                             -> NAME/env_ab.md
#   2. graph_priority.py --split 2: torch's launch / node priorities as captured / by kernel name, and the two
#      latter's launches with the split (why: a cuDNN weight gradient is one wave of SM-filling blocks, so no
#      priority helps until its blocks end; split, they end twice as often)                   -> NAME/priority/
#   3. the GPU tests of the split, the two opt-in levers, and the model tests' CUDA comparisons -> NAME/gpu_tests.txt
# Packed after each step.   bash benchmarks/gpu_split_1205.sh NAME
set -uo pipefail
NAME=${1:-split_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
pack() { (cd "$OUT" && tar czf "$NAME.tgz" "$NAME"); }
DD=MSCRED_DECONV_DIRECT=1; IL=MSCRED_INTERLEAVED_LEVELS=1
timeout 250 python3 benchmarks/env_ab.py --rounds 4 --out "$D" --variant "defaults:" --variant "deconv_direct:$DD" \
  --variant "interleaved:$IL" --variant "both:$DD,$IL" --variant "split2:MSCRED_WGRAD_SPLIT=2" \
  --variant "split4:MSCRED_WGRAD_SPLIT=4" > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -8 "$D/env_ab.md"; pack
bench_to_log "$D/priority" 120 benchmarks/graph_priority.py --split 2 --rounds 3
echo "priority done at ${SECONDS}s"; tail -8 "$D/priority/bench_log.txt"; pack
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-170}" -rf tests/test_wgrad_split.py \
  tests/test_small_deconv.py tests/test_interleaved_levels.py tests/test_window_loss.py tests/test_encoder_xh.py \
  tests/test_attention_cat.py
echo "tests done at ${SECONDS}s"
pack && rm -rf "$OUT/$NAME"
