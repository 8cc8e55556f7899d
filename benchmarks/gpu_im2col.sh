#!/usr/bin/env bash
# One device call for issue 7: build the im2col extension, run the im2col tests on the GPU, then bench_conv (cuDNN
# vs global / shared / implicit / implicit-pipe) and thesis_table. Everything goes to $OUT (default
# benchmarks/results): gpu_tests_im2col.txt (machine, build, pytest), conv.{json,md,log},
# thesis_table.{json,md,log}, sass_inspect_im2col_device.txt (registers and instruction mix of the kernels as built
# on the device). If bench_conv fails (a device fault is sticky for its process), it is rerun without implicit-pipe.
# Worst case just under 10 minutes (build ~35 s, then 180 + 60 + 120 + 120 + 140 s timeouts); typically ~3.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_im2col.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_extensions}
T="$OUT/gpu_tests_im2col.txt"
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  python3 -c "import time; t = time.time(); from mscred.ops import im2col; print('is_available:', im2col.is_available(), f'(build + check {time.time() - t:.1f} s)')" 2>&1
  timeout 180 python3 -m pytest -q -p no:cacheprovider -rs tests/test_ops_im2col.py tests/test_im2col_build.py 2>&1
  echo "pytest exit code $?"
} > "$T" 2>&1
tail -4 "$T"
# The kernels exactly as built for this device (cached extension from the step above).
SO=$(ls "$TORCH_EXTENSIONS_DIR"/mscred_im2col_sm*/mscred_im2col_sm*.so 2>/dev/null | head -1)
if [ -n "$SO" ]; then
  timeout 60 python3 -m mscred.cli.main sass inspect -k conv_ "$SO" > "$OUT/sass_inspect_im2col_device.txt" 2>&1 \
    || echo "sass inspect exit code $?" >> "$OUT/sass_inspect_im2col_device.txt"
fi
timeout 120 python3 benchmarks/bench_conv.py --out "$OUT" > "$OUT/conv.log" 2>&1
rc=$?; echo "bench_conv exit code $rc" >> "$OUT/conv.log"
if [ $rc -ne 0 ]; then  # a fault in the experimental kernel is sticky for the process: rerun without it
  mv "$OUT/conv.log" "$OUT/conv_with_implicit_pipe_failed.log"
  timeout 120 python3 benchmarks/bench_conv.py --out "$OUT" --skip implicit-pipe > "$OUT/conv.log" 2>&1
  echo "bench_conv (--skip implicit-pipe) exit code $?" >> "$OUT/conv.log"
fi
tail -16 "$OUT/conv.log"
timeout 140 python3 benchmarks/thesis_table.py --out "$OUT" --repeats 2 > "$OUT/thesis_table.log" 2>&1; echo "thesis_table exit code $?" >> "$OUT/thesis_table.log"
tail -12 "$OUT/thesis_table.log"
