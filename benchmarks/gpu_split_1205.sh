#!/usr/bin/env bash
# One device call (<10 min), written 2026-12-05 (session 53, no device lent that session): the two levers session 52
# left opt-in, each alone, and new opt-in levers of the chain's waits on cuDNN, all built and tested on the CPU only:
#   MSCRED_WGRAD_SPLIT=K   each weight gradient as K calls over slices of the images (ops/wgrad_stream.weight_grad):
#                          a cuDNN weight gradient is one wave of SM-filling blocks, so no priority helps the chain
#                          until its blocks end; split, they end K times as often;
#   MSCRED_PHASE_DGRAD=1   the encoder's conv2-4 and the decoder's deconv4-2 data gradients as Triton GEMMs of our own
#                          (ops/triton/strided_conv.py) instead of cuDNN's (conv2-4 49.4 + 23.3 + 19.9 us, deconv3 25.1
#                          us in the trace); =columns the encoder's only, =taps the encoder on its other kernel,
#                          =gather the decoder's only;
#   MSCRED_PHASE_DECONV=1  the decoder's transposed convolutions' forward on the same kernels (cuDNN: 8.5 + 9.5 +
#                          20.1 us); MSCRED_PHASE_CONV=1 the encoder's conv2-4 forward (cuDNN: 20.4 + 11.6 + 11.3 us).
# Steps, packed after each:
#   1. the graphed bf16 step in one alternation, 3 rounds: the defaults / MSCRED_DECONV_DIRECT=1 /
#      MSCRED_INTERLEAVED_LEVELS=1 (each alone: results/final_1205/ measured both together) / MSCRED_WGRAD_SPLIT=2 /
#      =2 for the ConvLSTMs' gradients only (MSCRED_WGRAD_SPLIT_MIN_GFLOP=10) / =4 / MSCRED_PHASE_DGRAD=1 / the
#      encoder's only (columns) / on its other kernel (taps) / the decoder's only (gather) / MSCRED_PHASE_DECONV=1 /
#      MSCRED_PHASE_CONV=1                                                                            -> NAME/env_ab.md
#   2. bench_strided_conv.py: the kernels' tiles against cuDNN at every shape they take in the step
#                                                                                                 -> NAME/strided_conv/
#   3. the GPU tests of the new kernels and of the split, in what time is left                  -> NAME/gpu_tests.txt
# The rest (node priorities with the split, the other opt-in levers' and model tests' GPU runs): gpu_split_1205_more.sh
#   bash benchmarks/gpu_split_1205.sh NAME
set -uo pipefail
NAME=${1:-split_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
PD=MSCRED_PHASE_DGRAD
timeout 340 python3 benchmarks/env_ab.py --rounds 3 --out "$D" --variant "defaults:" \
  --variant "deconv_direct:MSCRED_DECONV_DIRECT=1" --variant "interleaved:MSCRED_INTERLEAVED_LEVELS=1" \
  --variant "split2:MSCRED_WGRAD_SPLIT=2" \
  --variant "split2_large:MSCRED_WGRAD_SPLIT=2,MSCRED_WGRAD_SPLIT_MIN_GFLOP=10" \
  --variant "split4:MSCRED_WGRAD_SPLIT=4" --variant "phase_all:$PD=1" \
  --variant "phase_encoder:$PD=columns" --variant "phase_encoder_taps:$PD=taps" --variant "phase_decoder:$PD=gather" \
  --variant "phase_deconv:MSCRED_PHASE_DECONV=1" --variant "phase_conv:MSCRED_PHASE_CONV=1" \
  > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -14 "$D/env_ab.md"; pack_result "$NAME"
bench_to_log "$D/strided_conv" 130 benchmarks/bench_strided_conv.py
echo "strided-conv bench done at ${SECONDS}s"; grep -E "cuDNN|exit" "$D/strided_conv/bench_log.txt" | tail -13
pack_result "$NAME"
LEFT=$(( 585 - SECONDS )); [ "$LEFT" -gt 20 ] || LEFT=20
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-$LEFT}" -rf tests/test_strided_conv.py \
  tests/test_wgrad_split.py
echo "tests done at ${SECONDS}s"
pack_result "$NAME" && rm -rf "$OUT/$NAME"
