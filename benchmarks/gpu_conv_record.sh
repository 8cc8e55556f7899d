#!/usr/bin/env bash
# One device call (~6 min): the record of the encoder's convolution kernels as the product runs them, with the
# checks a kernel change needs before it is the default:
#   1. the harness (build/conv_harness, built on the CPU box and carried): the product's dispatch ("pipe") beside
#      the kernels it chooses between, per layer, at batch 640 (n = 30), checked and timed at batches 1, 7, 395,
#      396 (conv3's two tiles' edge) and 643 and at n = 16 and 29 -> $D/probe.txt (with $ROWS overriding the rows: "conv3:pipe,... conv4:...")
#   2. the GPU tests of the whole-plane and halo kernels (tests/test_im2col_fast_paths.py) and the encoder op grid of
#      the implicit-pipe variant (forward and gradients, tests/test_ops_im2col.py -k implicit-pipe) -> $D/gpu_tests_*
#   3. bench_conv.py --timing graph (issue 7's record: cuDNN beside ours, through PyTorch) -> $D/bench/
#   4. thesis_table.py (issue 7's table) -> $D/thesis_table/
# Writes $OUT/${RECORD_DIR:-conv_record}.tgz (the folder, archived: a device call brings back at most 8 files).
# Usage (repository root, CUDA machine; carry build/conv_harness):
#   RECORD_DIR=conv3_patch_record bash benchmarks/gpu_conv_record.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
NAME=${RECORD_DIR:-conv_record}
D="$OUT/$NAME"; mkdir -p "$D"
bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
SPEC=${ROWS:-"conv1:pipe conv2:pipe,halo2,halo2_wgmma conv3:pipe,X424_1_3_2,X2410_5_4_1,U1_3_3 conv4:pipe,R245_10_4_1,T1_128_3_3"} \
  TAIL_BATCHES="1 7 395 396 643" TAIL_N="16 29" NCU_VARIANTS="" timeout 200 bash benchmarks/gpu_conv_probe.sh \
  > "$D/probe_console.txt" 2>&1
cp "$OUT/conv_probe/probe.txt" "$D/" 2>/dev/null
rm -rf "$OUT/conv_probe"
grep -E "^conv[1-4] |copy_GBps|^## |exit code" "$D/probe.txt" | head -40
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_fast_paths.txt" 200 tests/test_im2col_fast_paths.py
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_ops.txt" 200 tests/test_ops_im2col.py -k "implicit-pipe"
mkdir -p "$D/bench"
timeout 150 python3 benchmarks/bench_conv.py --timing graph --out "$D/bench" > "$D/bench/conv.log" 2>&1
echo "bench_conv exit code $?"
grep -E "^\| conv[1-4] \| (cudnn|implicit-pipe) " "$D/bench/conv.md"
grep -E "^implicit-pipe vs cuDNN" "$D/bench/conv.md"
mkdir -p "$D/thesis_table"
timeout 150 python3 benchmarks/thesis_table.py --out "$D/thesis_table" > "$D/thesis_table/thesis_table.log" 2>&1
echo "thesis_table exit code $?"
tail -8 "$D/thesis_table/thesis_table.log"
tar czf "$OUT/$NAME.tgz" -C "$OUT" "$NAME" && rm -rf "$D"
echo "wrote $OUT/$NAME.tgz"
