#!/usr/bin/env bash
# One device call (~3 min): the attention forward's sweep on the scoring path (bench_attention_programs.py), then
# the attention's GPU tests. Writes $OUT/attention_programs/{attention_programs.md,.json,bench_log.txt,gpu_tests.txt}.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_attention_programs.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/attention_programs"; mkdir -p "$D"
{ bash benchmarks/machine_info.sh; timeout 150 python3 benchmarks/bench_attention_programs.py --out "$D"; echo "exit $?"; } \
  > "$D/bench_log.txt" 2>&1
grep -E "^\|" "$D/bench_log.txt" | tail -82
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 tests/test_ops_triton_attention.py tests/test_forward_windows.py
