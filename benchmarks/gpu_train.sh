#!/usr/bin/env bash
# One device call for issue 3 (training / inference speed), <= 240 s in all: GPU tests of the Triton ops, the model
# and the Trainer's CUDA-graph steps (<= 75 s), then bench_train.py (<= 145 s; its parts each in their own process,
# torch.compile of the reference compiling in parallel and timing last). Everything goes to $OUT/train/:
#   gpu_tests.txt                 machine, versions, pytest output
#   train.json, train.md          the benchmark tables (correctness check of every variant before its timings)
#   train_log.txt                 the benchmark's log
#   train_profile.txt             torch.profiler kernel tables (fused eager + bf16, reference eager, fused + graph)
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_train.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
D="$OUT/train"
mkdir -p "$D"
export PYTHONPATH=src PYTHONUNBUFFERED=1
T="$D/gpu_tests.txt"
# A per-test timeout where pytest-timeout is installed; the whole pytest run is bounded by `timeout` anyway.
PT_TIMEOUT=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout=45" || echo "")
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)"
  echo "per-test timeout: ${PT_TIMEOUT:-none (pytest-timeout absent); whole run: timeout 75}"
  # The subset that fits, most important first (the run is cut at 75 s): the Trainer's graphed steps (incl. n = 30,
  # batch 128, the shape that crashed H2's capture), the model tests, every full-size kernel row (fp32 strict and
  # bf16), CUDA-graph capture of the ops, and the 50-step loss curves.
  timeout 75 python3 -m pytest -q -p no:cacheprovider -rs -o faulthandler_timeout=60 --durations=8 $PT_TIMEOUT \
    tests/test_train.py tests/test_model.py tests/test_ops_triton_convlstm.py tests/test_ops_triton_attention.py \
    tests/test_ops_triton_train.py \
    -k "full_size or fifty or graph or autocast or dispatcher or test_model or n30" 2>&1
  echo "pytest exit code $?"
} > "$T" 2>&1
tail -5 "$T"
timeout 145 python3 benchmarks/bench_train.py --out "$D" --work /tmp/bench_train_work --budget-s 135 --iters 20 \
  > "$D/train_log.txt" 2>&1
echo "bench_train exit code $?" >> "$D/train_log.txt"
grep -E "^\| (reference|fused|torch)|FAILED|exit code" "$D/train_log.txt" | head -40
