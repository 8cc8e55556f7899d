#!/usr/bin/env bash
# One device call, the short form of gpu_train.sh for a session with little device time left (<= ~260 s):
#   1. GPU tests of what changed in the fused model: the small-channel conv and the fused ConvLSTM at full size
#      (every level shape, fp32 / bf16), the Trainer's graphed full-size step, the 50-step loss curves (<= 130 s)
#   2. bench_train.py --only eager,g-fused-bf16,g-fused,e2e-cold: the eager baselines, the graphed fused variants
#      (each in its own process), the cold end-to-end run (~90 s, capped at 160 s). The reference-graph and torch.compile rows
#      of results/train.md come from the last full run (that code did not change).
#   3. One ablation in the same call: the graphed bf16 step with MSCRED_LSTM_PADDED_COPY=0 (<= 25 s).
# Writes $OUT/train/{gpu_tests.txt, train.md, train.json, train_profile.txt, train_log.txt, ablation_padded_copy.md}.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_train_light.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
D="$OUT/train"; export D
mkdir -p "$D"
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)"
  timeout 130 python3 -m pytest -q -p no:cacheprovider -rs -o faulthandler_timeout=60 --durations=8 \
    tests/test_ops_triton_small_conv.py tests/test_ops_triton_convlstm.py tests/test_ops_triton_train.py \
    tests/test_train.py -k "full_size or fifty" 2>&1
  echo "pytest exit code $?"
} > "$D/gpu_tests.txt" 2>&1
tail -3 "$D/gpu_tests.txt"
timeout 160 python3 benchmarks/bench_train.py --out "$D" --work /tmp/bench_train_work --budget-s 150 --iters 20 \
  --no-graph-profile --no-compile --only eager,g-fused-bf16,g-fused,e2e-cold > "$D/train_log.txt" 2>&1
echo "bench_train exit code $?" >> "$D/train_log.txt"
grep -E "^\| (reference eager|fused)|^part |FAILED|exit code" "$D/train_log.txt" | head -40
rm -rf /tmp/ab_pad0; mkdir -p /tmp/ab_pad0
MSCRED_LSTM_PADDED_COPY=0 timeout 40 python3 benchmarks/bench_train.py --out /tmp/ab_pad0 --work /tmp/ab_pad0 \
  --iters 20 --no-graph-profile --part g-fused-bf16 > "$D/ablation_log.txt" 2>&1
python3 - <<'PY' >> "$D/ablation_log.txt" 2>&1
import json, os
from pathlib import Path
r = json.loads(Path("/tmp/ab_pad0/train_g-fused-bf16.json").read_text())
lines = ["# Ablation: fused + CUDA graph + bf16 with MSCRED_LSTM_PADDED_COPY=0 (grown input-conv outputs on every "
         "level), same device call as train.md", ""]
for t in r.get("train_step", []):
    lines.append(f"- training step: {t['variant']}: {t['step_ms']:.2f} ms")
for t in r.get("inference", []):
    lines.append(f"- inference: {t['variant']}, batch {t['batch']}: {t['windows_per_s']:,.0f} windows/s")
Path(os.environ["D"], "ablation_padded_copy.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
tail -8 "$D/ablation_log.txt"
