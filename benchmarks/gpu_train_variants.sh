#!/usr/bin/env bash
# One device call: bench_train.py parts under different environment settings, side by side.
#   bash benchmarks/gpu_train_variants.sh NAME SPEC [SPEC...]
#   SPEC = LABEL:PARTS[:VAR=VAL[,VAR=VAL...]]      PARTS = bench_train parts joined by '+', e.g. g-fused-bf16+g-fused
# The eager part (the baselines, the eager profiles) runs once with the default settings; then each SPEC's parts run
# in their own processes with that SPEC's variables. Writes $OUT/NAME/LABEL.md (the eager part + the SPEC's parts)
# and $OUT/NAME/log.txt. Each part is cut at PART_TIMEOUT_S (default 45) seconds; BENCH_ARGS are added to every
# bench_train call (BENCH_ARGS=--quick: a CPU smoke run of this script).
# Example: bash benchmarks/gpu_train_variants.sh padded_copy off:g-fused-bf16:MSCRED_LSTM_PADDED_COPY=0 \
#            on:g-fused-bf16:MSCRED_LSTM_PADDED_COPY=1
set -uo pipefail
NAME=$1; shift
. benchmarks/device_env.sh
D="$OUT/$NAME"; mkdir -p "$D"
B="python3 -X faulthandler benchmarks/bench_train.py --iters 30 --no-graph-profile --out $D ${BENCH_ARGS:-}"
W=/tmp/train_variants; rm -rf "$W"; mkdir -p "$W/eager"
{
  timeout 70 $B --work "$W/eager" --part eager; echo "eager exit $?"
  for spec in "$@"; do
    IFS=: read -r label parts vars <<< "$spec"
    mkdir -p "$W/$label"; cp "$W/eager/train_eager.json" "$W/$label/" 2>/dev/null
    envs=(); [ -n "${vars:-}" ] && IFS=, read -r -a envs <<< "$vars"
    for part in ${parts//+/ }; do
      env "${envs[@]}" timeout "${PART_TIMEOUT_S:-45}" $B --work "$W/$label" --part "$part"
      echo "$label $part (${vars:-defaults}) exit $?"
    done
    python3 - "$W/$label" "$D/$label.md" "$parts" "${vars:-defaults}" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bench_train as bt
work, out, parts, env = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split("+"), sys.argv[4]
tmp = work / "merged"; tmp.mkdir(exist_ok=True)
md = bt.markdown(bt.merge(work, tmp, ("eager", *parts)))
out.write_text(f"Parts {', '.join(parts)} with {env}; the eager part with the defaults.\n\n" + md)
PY
  done
} > "$D/log.txt" 2>&1
grep -E "exit|FAILED" "$D/log.txt"
for spec in "$@"; do label=${spec%%:*}; echo "== $label"
  grep -E "^\| (reference eager|fused)" "$D/$label.md" | grep -v "^| reference eager |.*| [0-9]* |" | head -14; done
