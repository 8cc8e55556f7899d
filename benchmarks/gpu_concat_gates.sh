#!/usr/bin/env bash
# One device call (~2 min): the ConvLSTM's convolutions on [x_t, h_{t-1}] concatenated against the split input /
# recurrent calls, per level at the training batch (benchmarks/bench_concat_gates.py), before building the cell
# kernels' side of it. Usage: bash benchmarks/gpu_concat_gates.sh. Writes $OUT/concat_gates/.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir concat_gates)
bench_to_log "$D" 200 benchmarks/bench_concat_gates.py
tail -25 "$D/bench_log.txt"
