#!/usr/bin/env bash
# One device call (~1-2 min): `mscred fleet` on a folder of 4 synthetic entities (`mscred generate --seed 1..4`:
# 30 sensors, 20,000 steps each, 10 epochs) with the CUDA defaults (fused + graphs, one capture per entity, all in
# one process) against plain PyTorch (--backend reference --no-cuda-graphs); wall time from process start to
# summary, and the summary's quality columns. Writes $OUT/fleet_defaults/log.txt.
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/fleet_defaults"; mkdir -p "$D"
cache_bytecode
M="python3 -m mscred.cli.main"
W=/tmp/fleet_defaults; rm -rf "$W"; mkdir -p "$W/fleet"
{
  bash benchmarks/machine_info.sh
  for seed in 1 2 3 4; do $M generate "$W/fleet/e$seed" --seed $seed > /dev/null; done
  for variant in "defaults" "--backend reference --no-cuda-graphs"; do
    args=(); [ "$variant" != defaults ] && read -r -a args <<< "$variant"
    rm -rf "$W/out"; t=$(date +%s%N)
    timeout 200 $M fleet "$W/fleet" --out "$W/out" --quiet "${args[@]}"
    echo "fleet (${variant}) exit $? wall $(( ($(date +%s%N) - t) / 1000000 )) ms"
    cat "$W/out/summary.md" 2>/dev/null
  done
} > "$D/log.txt" 2>&1
cat "$D/log.txt"
