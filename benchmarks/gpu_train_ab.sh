#!/usr/bin/env bash
# One device call: an A/B of a switch of the fused model on the training / inference benchmark.
#   bash benchmarks/gpu_train_ab.sh NAME ENVVAR [pytest args...]
# 1. (optional) the GPU tests given as pytest arguments (<= 150 s)
# 2. bench_train.py parts in one run: the eager baselines once, then the graphed fused variants (bf16, fp32) each
#    in its own process, with ENVVAR=0 (off) and ENVVAR=1 (on)
# Writes $OUT/NAME/{gpu_tests.txt, off.md, on.md, log.txt}.
set -uo pipefail
NAME=$1; VAR=$2; shift 2
OUT=${OUT:-benchmarks/results}
D="$OUT/$NAME"; export D
mkdir -p "$D"
export PYTHONPATH=src PYTHONUNBUFFERED=1
if [ $# -gt 0 ]; then
  {
    date -u +%FT%TZ
    git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
    nvidia-smi --query-gpu=name,driver_version --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)"
    timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -o faulthandler_timeout=60 --durations=5 "$@" 2>&1
    echo "pytest exit code $?"
  } > "$D/gpu_tests.txt" 2>&1
  tail -3 "$D/gpu_tests.txt"
fi
B="python3 -X faulthandler benchmarks/bench_train.py --iters 30 --no-graph-profile --out $D"
rm -rf /tmp/ab_off /tmp/ab_on; mkdir -p /tmp/ab_off /tmp/ab_on
{
  env "$VAR=1" timeout 60 $B --work /tmp/ab_on --part eager; echo "eager ($VAR=1) exit $?"
  cp /tmp/ab_on/train_eager.json /tmp/ab_off/
  for part in g-fused-bf16 g-fused; do
    env "$VAR=0" timeout 40 $B --work /tmp/ab_off --part $part; echo "$part $VAR=0 exit $?"
    env "$VAR=1" timeout 40 $B --work /tmp/ab_on --part $part; echo "$part $VAR=1 exit $?"
  done
  python3 - "$VAR" <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bench_train as bt
for tag in ("off", "on"):
    tmp = Path(f"/tmp/ab_md_{tag}"); tmp.mkdir(exist_ok=True)
    md = bt.markdown(bt.merge(Path(f"/tmp/ab_{tag}"), tmp, ("eager", "g-fused-bf16", "g-fused")))
    head = f"{sys.argv[1]} = {'0' if tag == 'off' else '1'} for the graphed parts (the eager part ran with it = 1)\n\n"
    Path(os.environ["D"], f"{tag}.md").write_text(head + md)
PY
} > "$D/log.txt" 2>&1
grep -E "exit|FAILED" "$D/log.txt"
for tag in off on; do echo "== $VAR $tag"; grep -E "^\| (reference eager|fused)" "$D/$tag.md" | grep -v "^| reference eager |.*| [0-9]* |" | head -12; done
