#!/usr/bin/env bash
# One device call (~2 min): the graphed bf16 training step with level 1's attention folded (MSCRED_LSTM_ATTN_FOLD
# unset, the default) against not (=0), 5 rounds in alternation: results/attn_fold/ and results/attn_fold_levels/
# disagreed (~19 us against none).
# Writes $OUT/NAME.tgz: NAME/{machine.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_attn_fold_ab.sh NAME
set -uo pipefail
NAME=${1:-attn_fold_ab}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 200 python3 benchmarks/env_ab.py --var MSCRED_LSTM_ATTN_FOLD --values 0, --rounds 5 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -4 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
