#!/usr/bin/env bash
# One device call (~5 min): the weight gradients' side stream on a green context (ops/green_stream.py,
# MSCRED_WGRAD_STREAM_SMS=N; written 2026-12-04 without device time).
#   1. green_ctx_probe.py: the API here, the SMs a green stream's GEMM gets, small kernels beside it, a CUDA graph
#      forking to it -> NAME/probe/
#   2. tests/test_wgrad_stream.py and tests/test_green_stream.py with MSCRED_WGRAD_STREAM_SMS=66, then the graphed
#      bf16 step with MSCRED_WGRAD_STREAM_SMS unset / 100 / 66 in alternation, 3 rounds (gpu_tests_step_ab.sh)
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_green_wgrad.sh NAME
set -uo pipefail
NAME=${1:-green_wgrad}
. benchmarks/device_env.sh
mkdir -p "$OUT/$NAME"
timeout 120 python3 benchmarks/green_ctx_probe.py --sms 66 --out "$OUT/$NAME/probe" > "$OUT/$NAME/probe_log.txt" 2>&1
echo "probe exit $? at ${SECONDS}s"
MSCRED_WGRAD_STREAM_SMS=66 TEST_TIMEOUT_S=150 exec bash benchmarks/gpu_tests_step_ab.sh "$NAME" \
  MSCRED_WGRAD_STREAM_SMS ",100,66" 3 tests/test_wgrad_stream.py tests/test_green_stream.py
