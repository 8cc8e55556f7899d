#!/usr/bin/env bash
# One device call (~5 min): the halo conv2 kernel (conv_halo3x3s2, ops/im2col/halo_s2.cuh) against the generic
# kernel, and the checks it needs as a default:
#   1. the harness (build/conv_harness, built with -lineinfo on the CPU box and carried), the generic kernel forced
#      for its "pipe" row (MSCRED_CONV2_KERNEL=generic): conv2 rows pipe / halo2 / the earlier band kernel and
#      halo2's probes (each without one part: timings that bound it) at batch 640 (n = 30), checked and timed at
#      batches 1, 7, 132, 160 and 643 and at n = 16, 29, 17 and 5 (odd inputs: top/left padding too), Nsight
#      Compute profiles of halo2 and the generic kernel -> $D/{probe.txt, ncu.txt}
#   2. Nsight Compute's source page for halo2 (per-line instructions and stalls) -> $D/halo2_source.{csv,md}
#   3. the GPU tests: the kernel forced on, forced off and left to its dispatch against float64 at awkward sizes
#      (tests/test_im2col_fast_paths.py -k conv2), and the encoder op grid of the implicit-pipe variant (forward and
#      gradients, tests/test_ops_im2col.py) with the kernel forced on -> $D/gpu_tests_*.txt
#   4. bench_conv.py --timing graph (the issue's record) with MSCRED_CONV2_KERNEL=generic / unset (auto, the
#      product) -> $D/{generic,auto}/
#   5. thesis_table.py (issue 7's table) with the product's kernels -> $D/thesis_table/
# Writes $OUT/${HALO2_DIR:-conv2_halo}.tgz (the folder, archived). Earlier versions' runs: results/conv2_halo*/ and
# results/conv2_pingpong/ (their READMEs).
# Usage (repository root, CUDA machine; carry build/conv_harness):
#   HALO2_DIR=record_next bash benchmarks/gpu_conv2_halo.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/${HALO2_DIR:-conv2_halo}"; mkdir -p "$D"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
ROWS=pipe,halo2,halo2_noload,halo2_nomma,halo2_mma_only,halo2_noepi,halo2_nostore,halo2_noselu,band
MSCRED_CONV2_KERNEL=generic SPEC="conv2:$ROWS" TAIL_BATCHES="1 7 132 160 643" TAIL_N="16 29 17 5" \
  NCU_VARIANTS=halo2,pipe NCU_KERNELS="conv_halo3x3s2|conv_pipelined" timeout 200 bash benchmarks/gpu_conv_probe.sh \
  > "$D/probe_console.txt" 2>&1
cp "$OUT/conv_probe/probe.txt" "$OUT/conv_probe/ncu.txt" "$D/" 2>/dev/null
rm -rf "$OUT/conv_probe"
grep -E "^conv2 +(pipe|halo2 |band)|^conv2 +halo2_|copy_GBps|^## |exit code" "$D/probe.txt" | head -60
grep -E "  void |inst_executed|Duration|Issued Warp|Registers Per|No Eligible|Warp Cycles Per Issued|Mem Busy" \
  "$D/ncu.txt" | sed 's/(const float.*//' | head -20
timeout 100 ncu --section SourceCounters -k "regex:conv_halo3x3s2" -c 1 --page source --print-source cuda,sass --csv \
  build/conv_harness --iters 1 --only conv2 --variants halo2 > "$D/halo2_source.csv" 2> "$D/halo2_source.txt"
echo "halo2 source page exit code $? ($(wc -l < "$D/halo2_source.csv") lines)"
python3 benchmarks/ncu_source_summary.py "$D/halo2_source.csv" --top 14 > "$D/halo2_source.md" 2>&1
head -24 "$D/halo2_source.md" | cut -c1-200
gzip -9f "$D/halo2_source.csv"
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
mkdir -p "$D/thesis_table"
timeout 150 python3 benchmarks/thesis_table.py --out "$D/thesis_table" > "$D/thesis_table/thesis_table.log" 2>&1
echo "thesis_table exit code $?"
cat "$D/thesis_table/thesis_table.log" | tail -8
# More files than a device call brings back (8): the folder leaves as one archive, $OUT/<HALO2_DIR>.tgz.
tar czf "$OUT/${HALO2_DIR:-conv2_halo}.tgz" -C "$OUT" "${HALO2_DIR:-conv2_halo}" && rm -rf "$D"
echo "wrote $OUT/${HALO2_DIR:-conv2_halo}.tgz"
