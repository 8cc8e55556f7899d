#!/usr/bin/env bash
# One device call (~2 min): where the fused bf16 training step's kernels come from (bench_cell_bwd.py --step-only):
# eager with cuDNN autotuned and with its heuristics (kernel counts, ops with shapes, the copies' Python stacks) and
# the graphed step's replays (both settings); then the bias-gradient test with deterministic cuDNN.
# Writes $OUT/step_ops.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir step_ops)
bench_to_log "$D" 240 benchmarks/bench_cell_bwd.py --step-only
grep -E "^## " "$D/step_ops.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 60 tests/test_ops_triton_convlstm.py -k "bias_gradient"
(cd "$OUT" && tar czf step_ops.tgz step_ops && rm -rf step_ops)
