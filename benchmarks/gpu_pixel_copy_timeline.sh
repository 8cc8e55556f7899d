#!/usr/bin/env bash
# One device call (~4 min on a fresh machine): the step's time line with the Triton pixel copy on
# (MSCRED_PIXEL_COPY_KERNEL=1, graph_timeline.py: the copies' own kernel times, against results/next_1206/timeline/
# with PyTorch's copies), then the graphed full-size fused step's GPU test with it on (cut by the time cap in
# results/pixel_copy/ while the machine built its CUDA extensions) -> $OUT/NAME.tgz
#   bash benchmarks/gpu_pixel_copy_timeline.sh NAME
set -uo pipefail
NAME=${1:-pixel_copy_timeline}
. benchmarks/device_env.sh
D=$(result_dir "$NAME")
export MSCRED_PIXEL_COPY_KERNEL=1
timeout 200 python3 benchmarks/graph_timeline.py --replays 5 --out "$D/timeline" > "$D/timeline_log.txt" 2>&1
echo "timeline exit $? at ${SECONDS}s"; grep -A7 "| replay" "$D/timeline/graph_timeline.md" | head -9
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 120 tests/test_train.py -k "cuda_graph_full_size and fused"
echo "tests done at ${SECONDS}s"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
