#!/usr/bin/env bash
# A short device call (~3 min) for a session with little device time left (written 2026-12-05, session 55, after
# an hour of refused starts left ~7 min): gpu_split_1205.sh's alternation cut to the likeliest levers, 2 rounds --
# the defaults / MSCRED_WGRAD_SPLIT=2 / =2 for the ConvLSTMs' gradients only / MSCRED_PHASE_DGRAD=1 /
# MSCRED_PHASE_DECONV=1. Measures only: nothing is adopted without gpu_split_1205.sh's GPU tests.
#   bash benchmarks/gpu_split_short_1205.sh NAME                                              -> NAME/env_ab.md
set -uo pipefail
NAME=${1:-split_short_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout "${AB_TIMEOUT_S:-240}" python3 benchmarks/env_ab.py --rounds 2 --out "$D" --variant "defaults:" \
  --variant "split2:MSCRED_WGRAD_SPLIT=2" \
  --variant "split2_large:MSCRED_WGRAD_SPLIT=2,MSCRED_WGRAD_SPLIT_MIN_GFLOP=10" \
  --variant "phase_all:MSCRED_PHASE_DGRAD=1" --variant "phase_deconv:MSCRED_PHASE_DECONV=1" \
  > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -10 "$D/env_ab.md"
pack_result "$NAME" && rm -rf "$OUT/$NAME"
