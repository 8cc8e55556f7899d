#!/usr/bin/env bash
# One device call (<= ~150 s): `mscred train` with its defaults on a CUDA device (backend auto -> fused, CUDA graphs
# on) against the plain-PyTorch path asked for explicitly (--backend reference --no-cuda-graphs), both fp32, on the
# built-in synthetic data (30 sensors, 20,000 steps, 10 epochs); each model then scores the test series and is
# evaluated. Then the GPU test of the defaults (tests/test_detector.py).
# Writes $OUT/cli_defaults/{cli.log, tests.txt}. Usage (repository root, CUDA machine): bash benchmarks/gpu_cli_defaults.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/cli_defaults"; mkdir -p "$D"
M="python3 -m mscred.cli.main"
W=/tmp/cli_defaults; rm -rf "$W"; mkdir -p "$W"
{
  bash benchmarks/machine_info.sh
  $M env | tail -1
  $M generate "$W/data"
  # The defaults twice: the first run in a fresh machine also compiles the Triton kernels (cached on disk after).
  for variant in "defaults" "defaults" "--backend reference --no-cuda-graphs"; do
    args=(); [ "$variant" != defaults ] && read -r -a args <<< "$variant"
    echo "== mscred train ${args[*]:-(defaults)}"
    t0=$(date +%s%N)
    timeout 120 $M train "$W/data/train.csv" --out "$W/m" --quiet "${args[@]}"; echo "train exit $?"
    echo "train wall $(( ($(date +%s%N) - t0) / 1000000 )) ms (process start to saved model)"
    python3 -c "import json; m = json.load(open('$W/m/config.json')); c = m['config']; print('saved backend', c['model']['backend'], 'cuda_graphs', c['train']['cuda_graphs'], 'epoch seconds', [round(h['seconds'], 3) for h in m['history']])"
    t0=$(date +%s%N)
    timeout 60 $M detect "$W/m" "$W/data/test.csv" --out "$W/s.csv"; echo "detect exit $?"
    echo "detect wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    $M evaluate "$W/s.csv" --labels "$W/data/test.csv" --json | python3 -c "import json, sys; r = json.load(sys.stdin); print({k: r[k] for k in ('precision', 'recall', 'events_found', 'events_total', 'root_cause_recall_at_3', 'auc_pr')})"
    rm -rf "$W/m" "$W/m.checkpoints"
  done
} > "$D/cli.log" 2>&1
cat "$D/cli.log"
[ -n "${SKIP_TESTS:-}" ] && exit 0
timeout 90 python3 -m pytest -q -p no:cacheprovider -rs tests/test_detector.py -k "defaults or auto" > "$D/tests.txt" 2>&1
echo "pytest exit code $?" >> "$D/tests.txt"; tail -3 "$D/tests.txt"
