#!/usr/bin/env bash
# One device call: do the fused model's side streams (src/mscred/level_streams.py) pay, and are they correct?
#   1. GPU tests: tests/test_level_streams.py (streams vs one stream, graphed step with streams), the fused
#      ConvLSTM ops' full-size and float64 rows (<= 150 s)
#   2. bench_train.py parts in one run: the eager baselines, then the graphed fused variants each in its own
#      process, with MSCRED_LEVEL_STREAMS=0 (one stream) and =1 (side streams) (<= 150 s)
# Writes $OUT/level_streams/{gpu_tests.txt, streams_off.md, streams_on.md, log.txt}.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_level_streams.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/level_streams"; export D
mkdir -p "$D"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_level_streams.py tests/test_ops_triton_convlstm.py \
  -k "streams or float64 or full_size or graph"
B="python3 -X faulthandler benchmarks/bench_train.py --iters 30 --no-graph-profile --out $D"
W0=/tmp/ls_off; W1=/tmp/ls_on; rm -rf $W0 $W1; mkdir -p $W0 $W1
{
  timeout 60 $B --work $W0 --part eager; echo "eager exit $?"
  cp $W0/train_eager.json $W1/
  for part in g-fused-bf16 g-fused; do
    MSCRED_LEVEL_STREAMS=0 timeout 40 $B --work $W0 --part $part; echo "$part streams=0 exit $?"
    MSCRED_LEVEL_STREAMS=1 timeout 40 $B --work $W1 --part $part; echo "$part streams=1 exit $?"
  done
  python3 - <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bench_train as bt
for tag in ("off", "on"):
    tmp = Path(f"/tmp/ls_md_{tag}"); tmp.mkdir(exist_ok=True)
    md = bt.markdown(bt.merge(Path(f"/tmp/ls_{tag}"), tmp, ("eager", "g-fused-bf16", "g-fused")))
    Path(os.environ["D"], f"streams_{tag}.md").write_text(f"MSCRED_LEVEL_STREAMS = {tag}\n\n" + md)
PY
} > "$D/log.txt" 2>&1
for tag in off on; do echo "== streams $tag"; grep -E "^\| (reference eager|fused)" "$D/streams_$tag.md" | head -20; done
