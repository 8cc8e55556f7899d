#!/usr/bin/env bash
# One device call: the full bench_train.py table -> $OUT/NAME/ (train.md, train.json, the profiles, bench_log.txt).
#   bash benchmarks/gpu_train_table.sh NAME [bench_train arguments...]
# TABLE_CAP_S caps the run (default 420 s, the default budget's 400 s and the machine header). With little device
# time left: --only eager,g-fused-bf16,g-fused,g-ref-bf16,g-ref,e2e-cold,g-fused-bf16-heur --budget-s 300 leaves out
# the torch.compile row (its compilation takes ~245 s beside the eager part) and fits a fresh machine in ~6 min.
set -uo pipefail
NAME=$1; shift
. benchmarks/device_env.sh
D="$OUT/$NAME"
bench_to_log "$D" "${TABLE_CAP_S:-420}" benchmarks/bench_train.py "$@"
grep -E "^part |exit" "$D/bench_log.txt"
grep -E "^\| (reference eager|fused|torch.compile)" "$D/train.md" | head -24
