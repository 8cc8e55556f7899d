#!/usr/bin/env bash
# One device call for issue 7: build the im2col extension, run the im2col tests on the GPU, then bench_conv (cuDNN
# vs global / shared / implicit / implicit-pipe) and thesis_table. Everything goes to $OUT (default
# benchmarks/results): gpu_tests_im2col.txt (machine, build, pytest), conv.{json,md,log},
# thesis_table.{json,md,log}, sass_inspect_im2col_device.txt (registers and instruction mix of the kernels as built
# on the device). If bench_conv fails (a device fault is sticky for its process), it is rerun without implicit-pipe.
# implicit-pipe is left out of bench_conv when its tests failed. Typically ~3 minutes (build ~35 s, tests ~60 s,
# bench_conv ~60 s, thesis_table ~60 s); the timeouts keep a hang from eating the 10-minute call.
# Usage (repository root, on a CUDA machine): bash benchmarks/gpu_im2col.sh
set -uo pipefail
. benchmarks/device_env.sh
mkdir -p "$OUT"
T="$OUT/gpu_tests_im2col.txt"
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  python3 -c "import time; t = time.time(); from mscred.ops import im2col; print('is_available:', im2col.is_available(), f'(build + check {time.time() - t:.1f} s)')" 2>&1
  # The experimental variant's tests in a process of their own, after the others: a device fault is sticky for the
  # process and would otherwise fail every test after it.
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rs -k "not implicit-pipe" tests/test_ops_im2col.py tests/test_im2col_build.py tests/test_im2col_fast_paths.py 2>&1
  echo "pytest (all but implicit-pipe) exit code $?"
  timeout 90 python3 -m pytest -q -p no:cacheprovider -rs -k "implicit-pipe" tests/test_ops_im2col.py 2>&1
  echo "pytest (implicit-pipe) exit code $?"
} > "$T" 2>&1
SKIP=()  # implicit-pipe failed its tests: time the others only
grep -q "pytest (implicit-pipe) exit code 0" "$T" || SKIP=(--skip implicit-pipe)
tail -8 "$T"
# The kernels exactly as built for this device (cached extension from the step above).
SO=$(ls "$TORCH_EXTENSIONS_DIR"/mscred_im2col_sm*/mscred_im2col_sm*.so 2>/dev/null | head -1)
if [ -n "$SO" ]; then
  timeout 30 python3 -m mscred.cli.main sass inspect -k conv_ "$SO" > "$OUT/sass_inspect_im2col_device.txt" 2>&1 \
    || echo "sass inspect exit code $?" >> "$OUT/sass_inspect_im2col_device.txt"
fi
timeout 120 python3 benchmarks/bench_conv.py --out "$OUT" ${SKIP[@]+"${SKIP[@]}"} > "$OUT/conv.log" 2>&1
rc=$?; echo "bench_conv ${SKIP[*]+${SKIP[*]}} exit code $rc" >> "$OUT/conv.log"
if [ $rc -ne 0 ] && [ ${#SKIP[@]} -eq 0 ]; then  # a device fault is sticky for the process: rerun without it
  mv "$OUT/conv.log" "$OUT/conv_with_implicit_pipe_failed.log"
  timeout 120 python3 benchmarks/bench_conv.py --out "$OUT" --skip implicit-pipe > "$OUT/conv.log" 2>&1
  echo "bench_conv (--skip implicit-pipe) exit code $?" >> "$OUT/conv.log"
fi
tail -16 "$OUT/conv.log"
timeout 140 python3 benchmarks/thesis_table.py --out "$OUT" --repeats 2 > "$OUT/thesis_table.log" 2>&1; echo "thesis_table exit code $?" >> "$OUT/thesis_table.log"
tail -12 "$OUT/thesis_table.log"
