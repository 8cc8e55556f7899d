#!/usr/bin/env bash
# One device call (~5 min): the halo conv2 kernel (conv_halo3x3s2, ops/im2col/halo_s2.cuh) against the product's
# generic kernel, and the checks it needs before it can be the default:
#   1. the harness (build/conv_harness, built with -lineinfo on the CPU box and carried): conv2 rows pipe / halo2
#      (and the earlier band kernel) at batch 640 (n = 30), checked and timed at batches 1, 7, 132, 160 and 643 (the
#      dispatch's line is 2 tiles per SM: batch 132) and at n = 16, 29, 17 and 5 (odd inputs: top/left padding too),
#      Nsight Compute profile of halo2 -> $D/{probe.txt, ncu.txt}
#   2. Nsight Compute's source page for halo2 (per-line instructions and stalls) -> $D/halo2_source.{csv,md}
#   3. the GPU tests: the kernel forced on, forced off and left to its default against float64 at awkward sizes
#      (tests/test_im2col_fast_paths.py -k conv2), and the encoder op grid of the implicit-pipe variant (forward and
#      gradients, tests/test_ops_im2col.py) with the kernel forced on -> $D/gpu_tests.txt
#   4. bench_conv.py --timing graph (the issue's record) with MSCRED_CONV2_KERNEL=generic / unset (auto, the
#      product) -> $D/{generic,auto}/
# Writes $OUT/${HALO2_DIR:-conv2_halo}/.
# Usage (repository root, CUDA machine; carry build/conv_harness): bash benchmarks/gpu_conv2_halo.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/${HALO2_DIR:-conv2_halo}"; mkdir -p "$D"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
SPEC="conv2:pipe,halo2,band" TAIL_BATCHES="1 7 132 160 643" TAIL_N="16 29 17 5" NCU_VARIANTS=halo2,pipe \
  NCU_KERNELS="conv_halo3x3s2|conv_pipelined" timeout 150 bash benchmarks/gpu_conv_probe.sh > "$D/probe_console.txt" 2>&1
cp "$OUT/conv_probe/probe.txt" "$OUT/conv_probe/ncu.txt" "$D/" 2>/dev/null
rm -rf "$OUT/conv_probe"
grep -E "^conv2|copy_GBps|^## |exit code" "$D/probe.txt" | head -40
grep -E "  void |inst_executed|Duration|Issued Warp|Registers Per|No Eligible|Warp Cycles Per Issued" "$D/ncu.txt" \
  | sed 's/(const float.*//' | head -20
timeout 100 ncu --section SourceCounters -k "regex:conv_halo3x3s2" -c 1 --page source --print-source cuda,sass --csv \
  build/conv_harness --iters 1 --only conv2 --variants halo2 > "$D/halo2_source.csv" 2> "$D/halo2_source.txt"
echo "halo2 source page exit code $? ($(wc -l < "$D/halo2_source.csv") lines)"
python3 benchmarks/ncu_source_summary.py "$D/halo2_source.csv" --top 14 > "$D/halo2_source.md" 2>&1
head -30 "$D/halo2_source.md" | cut -c1-220
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_conv2.txt" 150 tests/test_im2col_fast_paths.py -k conv2
MSCRED_CONV2_KERNEL=halo bash benchmarks/gpu_pytest.sh "$D/gpu_tests_ops_forced.txt" 150 tests/test_ops_im2col.py \
  -k "implicit-pipe"
for mode in generic auto; do
  mkdir -p "$D/$mode"; value=$mode; [ $mode = auto ] && value=""
  MSCRED_CONV2_KERNEL=$value timeout 130 python3 benchmarks/bench_conv.py --timing graph --out "$D/$mode" \
    > "$D/$mode/conv.log" 2>&1
  echo "bench_conv ($mode) exit code $?"
  grep -E "^\| conv[1-4] \| (cudnn|implicit-pipe) " "$D/$mode/conv.md"
  grep -E "^implicit-pipe vs cuDNN" "$D/$mode/conv.md"
done
