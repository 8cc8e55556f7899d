#!/usr/bin/env bash
# One device call (~6 min): copy_pixels in 16-byte words (complex128; the default since 2026-12-02) against the
# 8-byte words before it (MSCRED_COPY_WORD_BYTES=8). bench_copy_words.py times both and torch's copy_ at the step's
# copies, bit-checked; then bench_train.py's graphed bf16 part in alternation, twice (default_1, words8_1,
# default_2, words8_2, each part cut at 45 s); then the GPU tests that run those copies, with the default:
# padding and concatenation, the fused training op and model (50 steps against the reference), the concatenated
# ConvLSTM at full size.
# Usage: bash benchmarks/gpu_copy_words.sh. Writes $OUT/copy_words/.
set -uo pipefail
. benchmarks/device_env.sh
D=$(result_dir copy_words)
bench_to_log "$D" 120 benchmarks/bench_copy_words.py
grep -E "^\| " "$D/copy_words.md" | head -30
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh copy_words "default_1:g-fused-bf16" \
  "words8_1:g-fused-bf16:MSCRED_COPY_WORD_BYTES=8" "default_2:g-fused-bf16" "words8_2:g-fused-bf16:MSCRED_COPY_WORD_BYTES=8"
echo "variants done at ${SECONDS}s"
grep -h "train fused + CUDA graph" "$D/log.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_padding.py tests/test_concat.py \
  tests/test_ops_triton_train.py &
bash benchmarks/gpu_pytest.sh "$D/gpu_tests_convlstm.txt" 150 tests/test_ops_triton_convlstm.py -k concatenated &
wait
tail -2 "$D/gpu_tests.txt" "$D/gpu_tests_convlstm.txt"
