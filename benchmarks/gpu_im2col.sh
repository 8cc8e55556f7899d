#!/usr/bin/env bash
# One device call for issue 7: build the im2col extension, run the im2col tests on the GPU, then bench_conv and
# thesis_table. Everything goes to $OUT (default benchmarks/results): gpu_tests_im2col.txt (machine, build, pytest),
# conv.{json,md,log}, thesis_table.{json,md,log}.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_im2col.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_extensions}
T="$OUT/gpu_tests_im2col.txt"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  python3 -c "import time; t = time.time(); from mscred.ops import im2col; print('is_available:', im2col.is_available(), f'(build + check {time.time() - t:.1f} s)')" 2>&1
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_ops_im2col.py tests/test_im2col_build.py 2>&1
  echo "pytest exit code $?"
} > "$T" 2>&1
tail -4 "$T"
timeout 120 python3 benchmarks/bench_conv.py --out "$OUT" > "$OUT/conv.log" 2>&1; echo "bench_conv exit code $?" >> "$OUT/conv.log"
tail -14 "$OUT/conv.log"
timeout 150 python3 benchmarks/thesis_table.py --out "$OUT" --repeats 2 > "$OUT/thesis_table.log" 2>&1; echo "thesis_table exit code $?" >> "$OUT/thesis_table.log"
tail -12 "$OUT/thesis_table.log"
