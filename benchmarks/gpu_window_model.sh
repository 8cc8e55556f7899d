#!/usr/bin/env bash
# One device call (~5 min): the per-window ConvLSTM kernel as the product uses it.
#   1. GPU tests: the fused ConvLSTM op (every test: training path, inference both ways, opcheck, graphs) and the
#      model's window scoring -> $OUT/window_model/gpu_tests.txt
#   2. bench_window_model.py: whole-model scoring, eager and graphed, batch 32 .. 3,591 windows, with
#      MSCRED_WINDOW_LSTM=0 / all / 1 -> $OUT/window_model/{window_model.md,window_model.json}
# Usage (repository root, CUDA machine): bash benchmarks/gpu_window_model.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/window_model"; mkdir -p "$D"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_ops_triton_convlstm.py tests/test_forward_windows.py
{
  bash benchmarks/machine_info.sh
  timeout 200 python3 benchmarks/bench_window_model.py --out "$D"
  echo "bench_window_model exit $?"
} > "$D/bench_log.txt" 2>&1
tail -14 "$D/bench_log.txt"
