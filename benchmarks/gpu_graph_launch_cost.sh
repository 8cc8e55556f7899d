#!/usr/bin/env bash
# One device call (~4 min): graph_launch_cost.py with MSCRED_GRAPH_MEMSET_KERNELS=0 / 1 in alternation (the host's
# cost of a replay, one step from an idle GPU, back-to-back steps) -> $OUT/NAME.tgz
#   bash benchmarks/gpu_graph_launch_cost.sh NAME
set -uo pipefail
NAME=${1:-graph_launch_cost}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
timeout 400 python3 benchmarks/graph_launch_cost.py --var MSCRED_GRAPH_MEMSET_KERNELS --values 0,1 --rounds 2 \
  --out "$D" > "$D/log.txt" 2>&1
echo "exit $? at ${SECONDS}s"; tail -8 "$D/graph_launch_cost.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
