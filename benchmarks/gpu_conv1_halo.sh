#!/usr/bin/env bash
# One device call (~3 min): the halo conv1 kernel (conv_halo3x3, ops/im2col/halo.cuh) against the product's generic
# kernel, in its two store variants (16-byte stores: "halo"; bulk copies through the TMA: "halo_tma"), and the
# checks it needs as a default:
#   1. the harness (build/conv_harness, built with -lineinfo on the CPU box and carried): conv1 rows pipe / halo /
#      halo_tma at batch 640, checked at batches 7 and 643 and at n = 16 and 55, Nsight Compute profiles of both
#      halo rows -> $D/{probe.txt, ncu.txt}
#   2. Nsight Compute's source page for halo (per-line instructions and stalls) -> $D/halo_source.{csv,md}
#   3. the GPU tests: the halo kernel forced on in both variants and left to its dispatch (auto), against float64 at
#      awkward sizes (tests/test_im2col_fast_paths.py), and the encoder op grid of the implicit-pipe variant, forward
#      and gradients (tests/test_ops_im2col.py), with the dispatch as shipped -> $D/gpu_tests.txt
#   4. bench_conv.py --timing graph (the issue's record) with MSCRED_CONV1_KERNEL=generic / unset (auto, the
#      product) / halo_tma -> $D/{generic,auto,halo_tma}/
# Writes $OUT/${HALO_DIR:-conv1_halo}/. Earlier versions' runs: results/conv1_halo{,_v2,_v3}/ (their own scripts'
# steps, in their READMEs).
# Usage (repository root, CUDA machine; carry build/conv_harness): HALO_DIR=conv1_halo_v4 bash benchmarks/gpu_conv1_halo.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/${HALO_DIR:-conv1_halo}"; mkdir -p "$D"
SPEC="conv1:pipe,halo,halo_tma" TAIL_BATCHES="7 643" TAIL_N="16 55" NCU_VARIANTS=halo,halo_tma \
  NCU_KERNELS=conv_halo3x3 timeout 150 bash benchmarks/gpu_conv_probe.sh > "$D/probe_console.txt" 2>&1
cp "$OUT/conv_probe/probe.txt" "$OUT/conv_probe/ncu.txt" "$D/" 2>/dev/null
grep -E "^conv1|copy_GBps|^## |exit code" "$D/probe.txt" | head -40
grep -E "inst_executed|Duration|Issued Warp" "$D/ncu.txt" | head -12
timeout 100 ncu --section SourceCounters -k "regex:conv_halo3x3" -c 1 --page source --print-source cuda,sass --csv \
  build/conv_harness --iters 1 --only conv1 --variants halo > "$D/halo_source.csv" 2> "$D/halo_source.txt"
echo "halo source page exit code $? ($(wc -l < "$D/halo_source.csv") lines)"
python3 benchmarks/ncu_source_summary.py "$D/halo_source.csv" --top 14 > "$D/halo_source.md" 2>&1
head -4 "$D/halo_source.md" | cut -c1-300
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 240 tests/test_im2col_fast_paths.py tests/test_ops_im2col.py \
  -k "not test_ops_im2col or implicit-pipe"
for mode in generic auto halo_tma; do
  mkdir -p "$D/$mode"; value=$mode; [ $mode = auto ] && value=""
  MSCRED_CONV1_KERNEL=$value timeout 130 python3 benchmarks/bench_conv.py --timing graph --out "$D/$mode" \
    > "$D/$mode/conv.log" 2>&1
  echo "bench_conv ($mode) exit code $?"
  grep -E "^\| conv1 \| (cudnn|implicit-pipe) " "$D/$mode/conv.md"
done
