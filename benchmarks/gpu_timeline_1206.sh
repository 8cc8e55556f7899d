#!/usr/bin/env bash
# The next device session's first call (<10 min), written in session 56 (2026-12-05) after deconv1's direct path
# became the default again (results/direct_interleaved_1205/): on the H200 of the issue,
#   1. the graphed bf16 step's time line on the defaults (graph_timeline.py, 5 replays): where the chain waits
#      now, the trace the next lever should come from                                         -> NAME/timeline/
#   2. the defaults against MSCRED_DECONV_DIRECT=0 in one alternation of 5 rounds (the H200's own measure of the
#      new default; the H100 had -17 to -23 us)                                                -> NAME/env_ab.md
#   3. the GPU tests of the model-level files in what time is left (bit-equalities met the GPU's atomic adds
#      twice; these compare to rounding on CUDA)                                               -> NAME/gpu_tests.txt
#   bash benchmarks/gpu_timeline_1206.sh NAME
set -uo pipefail
NAME=${1:-timeline_1206}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 150 python3 benchmarks/graph_timeline.py --replays 5 --out "$D/timeline" > "$D/timeline_log.txt" 2>&1
echo "time line exit $? at ${SECONDS}s"; tail -5 "$D/timeline_log.txt"; pack_result "$NAME"
timeout 150 python3 benchmarks/env_ab.py --rounds 5 --out "$D" --variant "defaults:" \
  --variant "flipped_deconv1:MSCRED_DECONV_DIRECT=0" > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"; pack_result "$NAME"
LEFT=$(( 585 - SECONDS )); [ "$LEFT" -gt 20 ] || LEFT=20
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-$LEFT}" -rf tests/test_small_deconv.py \
  tests/test_model.py tests/test_ops_triton_train.py tests/test_weight_cache.py tests/test_encoder_xh.py \
  tests/test_attention_cat.py tests/test_interleaved_levels.py
echo "tests done at ${SECONDS}s"
pack_result "$NAME" && rm -rf "$OUT/$NAME"
