#!/usr/bin/env bash
# The second device call after gpu_split_1205.sh (<10 min), written 2026-12-05 (session 53):
#   1. graph_priority.py --split 2, 2 rounds: torch's launch / node priorities as captured / by kernel name, and the
#      two latter captured with MSCRED_WGRAD_SPLIT=2 (split, the weight gradients' blocks end twice as often, so a
#      chain kernel of higher priority can take their SMs)                                     -> NAME/priority/
#   2. the GPU tests of the two older opt-in levers and the model tests' CUDA comparisons (model_runs.assert_same_step;
#      gpu_final_1205.sh's call ran out of device time after 20 of them), then the new kernels' again if time is left,
#      and (session 54) training on parts with CUDA graphs (tests/test_train_parts.py)
#                                                                                             -> NAME/gpu_tests.txt
#   bash benchmarks/gpu_split_1205_more.sh NAME
set -uo pipefail
NAME=${1:-split_1205_more}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bench_to_log "$D/priority" 120 benchmarks/graph_priority.py --split 2 --rounds 2
echo "priority done at ${SECONDS}s"; tail -8 "$D/priority/bench_log.txt"; pack_result "$NAME"
LEFT=$(( 585 - SECONDS )); [ "$LEFT" -gt 20 ] || LEFT=20
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-$LEFT}" -rf tests/test_small_deconv.py \
  tests/test_interleaved_levels.py tests/test_window_loss.py tests/test_encoder_xh.py tests/test_attention_cat.py \
  tests/test_wgrad_stream.py tests/test_strided_conv.py tests/test_wgrad_split.py tests/test_train_parts.py
echo "tests done at ${SECONDS}s"
pack_result "$NAME" && rm -rf "$OUT/$NAME"
