#!/usr/bin/env bash
# One device call (~2-3 min): `mscred train`'s wall time phase by phase (benchmarks/bench_cli_phases.py) on the
# built-in data (10 epochs, float32), each configuration in a fresh process, two rounds:
#   defaults (fused + CUDA graphs; cudnn_benchmark auto: no autotuning for this short run) / the same with cuDNN's
#   algorithms timed in the warm-up (--cudnn-benchmark on) / plain PyTorch (--backend reference --no-cuda-graphs)
#   / with FUSED_EAGER=1 also the fused kernels without graphs (--no-cuda-graphs);
# then the whole `mscred train` command with its defaults, process start to saved model.
# The first process also fills the Triton cache, as a user's first run does (reported as round 0).
# Then (optional, RUN_TESTS=1) the graphed training and scoring GPU tests. Writes $OUT/cli_phases/{phases.jsonl, log.txt}.
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/cli_phases"; mkdir -p "$D"
cache_bytecode  # the first process pays for the .pyc files (device_env.sh)
W=/tmp/cli_phases; rm -rf "$W"; mkdir -p "$W"
P="python3 benchmarks/bench_cli_phases.py $W/data/train.csv"
{
  bash benchmarks/machine_info.sh
  python3 -m mscred.cli.main generate "$W/data" > /dev/null
  echo "round 0 (fresh Triton cache)"; timeout 120 $P | tee -a "$D/phases.jsonl"
  for round in 1 2; do
    echo "round $round"
    timeout 120 $P | tee -a "$D/phases.jsonl"
    timeout 120 $P --cudnn-benchmark on | tee -a "$D/phases.jsonl"
    timeout 120 $P --backend reference --no-cuda-graphs | tee -a "$D/phases.jsonl"
    [ "${FUSED_EAGER:-0}" = 1 ] && timeout 120 $P --no-cuda-graphs | tee -a "$D/phases.jsonl"
  done
  for round in 1 2; do
    t=$(date +%s%N); rm -rf "$W/m"
    timeout 120 python3 -m mscred.cli.main train "$W/data/train.csv" --out "$W/m" --quiet
    echo "mscred train (defaults) exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms"
  done
  if [ "${RUN_TESTS:-0}" = 1 ]; then
    timeout 150 python3 -m pytest -q -p no:cacheprovider -rs --durations=5 tests/test_train.py \
      tests/test_forward_windows.py tests/test_detector.py tests/test_level_streams.py \
      -k "graph or defaults or auto or streams or checkpoint or writer" 2>&1
    echo "pytest exit code $?"
  fi
} > "$D/log.txt" 2>&1
cat "$D/log.txt" | cut -c1-600
