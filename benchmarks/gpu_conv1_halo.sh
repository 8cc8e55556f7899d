#!/usr/bin/env bash
# One device call (~5 min): the halo conv1 kernel (conv_halo3x3, ops/im2col/halo.cuh), second version (staging
# planned once per kernel, weights in shared memory, SELU on the accumulators), against the product's generic
# kernel, and the checks it needs before it can become the default:
#   1. the harness (build/conv_harness, built with -lineinfo on the CPU box and carried): conv1 rows pipe / halo at
#      batch 640, checked at batches 7 and 643 and at n = 16 and 55, and an Nsight Compute profile of halo
#      -> $D/{probe.txt, ncu.txt}
#   2. Nsight Compute's source page for halo (per-line instructions and stalls) -> $D/halo_source.csv
#   3. the GPU tests with MSCRED_CONV1_KERNEL=halo: the halo kernel against float64 at awkward sizes
#      (tests/test_im2col_fast_paths.py), the encoder op grid of the implicit-pipe variant, forward and gradients
#      (tests/test_ops_im2col.py) -> $D/gpu_tests.txt
#   4. bench_conv.py --timing graph (the issue's record) with the switch off and on -> $D/{off,on}/
# Writes $OUT/${HALO_DIR:-conv1_halo_v2}/ (the first version's results stay in results/conv1_halo/).
# Usage (repository root, CUDA machine; carry build/conv_harness): bash benchmarks/gpu_conv1_halo.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/${HALO_DIR:-conv1_halo_v2}"; mkdir -p "$D/off" "$D/on"
SPEC="conv1:pipe,halo" TAIL_BATCHES="7 643" TAIL_N="16 55" NCU_VARIANTS=halo NCU_KERNELS=conv_halo3x3 \
  timeout 150 bash benchmarks/gpu_conv_probe.sh > "$D/probe_console.txt" 2>&1
cp "$OUT/conv_probe/probe.txt" "$OUT/conv_probe/ncu.txt" "$D/" 2>/dev/null
grep -E "^conv1|copy_GBps|^## |exit code" "$D/probe.txt" | head -40
grep -E "inst_executed|Duration|Registers|Eligible|Issued Warp" "$D/ncu.txt" | head -12
timeout 100 ncu --section SourceCounters -k "regex:conv_halo3x3" -c 1 --page source --print-source cuda,sass --csv \
  build/conv_harness --iters 1 --only conv1 --variants halo > "$D/halo_source.csv" 2> "$D/halo_source.txt"
echo "halo source page exit code $? ($(wc -l < "$D/halo_source.csv") lines)"
python3 benchmarks/ncu_source_summary.py "$D/halo_source.csv" --top 14 > "$D/halo_source.md" 2>&1
head -4 "$D/halo_source.md" | cut -c1-300
MSCRED_CONV1_KERNEL=halo bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_im2col_fast_paths.py \
  tests/test_ops_im2col.py -k "not test_ops_im2col or implicit-pipe"
for mode in off on; do
  value=""; [ $mode = on ] && value=halo
  MSCRED_CONV1_KERNEL=$value timeout 130 python3 benchmarks/bench_conv.py --timing graph --out "$D/$mode" \
    > "$D/$mode/conv.log" 2>&1
  echo "bench_conv ($mode) exit code $?"
  grep -E "^\| conv1 \| (cudnn|implicit-pipe) " "$D/$mode/conv.md"
done
