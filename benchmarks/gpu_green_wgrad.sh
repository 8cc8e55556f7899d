#!/usr/bin/env bash
# One device call (~5 min): the weight gradients' side stream on a green context (ops/green_stream.py,
# MSCRED_WGRAD_STREAM_SMS=N; written 2026-12-04 without device time).
#   1. green_ctx_probe.py: the API here, the SMs a green stream's GEMM gets, small kernels beside it, a CUDA graph
#      forking to it -> NAME/probe/
#   2. tests/test_wgrad_stream.py and tests/test_green_stream.py with MSCRED_WGRAD_STREAM_SMS=66 -> NAME/gpu_tests.txt
#   3. the graphed bf16 step with MSCRED_WGRAD_STREAM_SMS unset / 100 / 66 in alternation, 3 rounds -> NAME/env_ab.md
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_green_wgrad.sh NAME
set -uo pipefail
NAME=${1:-green_wgrad}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 120 python3 benchmarks/green_ctx_probe.py --sms 66 --out "$D/probe" > "$D/probe_log.txt" 2>&1
echo "probe exit $? at ${SECONDS}s"; cat "$D/probe/green_ctx_probe.md" 2>/dev/null | tail -6
MSCRED_WGRAD_STREAM_SMS=66 bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_wgrad_stream.py \
  tests/test_green_stream.py
timeout 220 python3 benchmarks/env_ab.py --var MSCRED_WGRAD_STREAM_SMS --values ",100,66" --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -5 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
