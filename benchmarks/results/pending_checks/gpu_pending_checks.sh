#!/usr/bin/env bash
# One device call (<= ~400 s) for what the fourth session (2026-11-29) changed after its device time ran out:
#   1. GPU tests (<= 150 s): the CUDA defaults (tests/test_detector.py: auto -> fused + graphs for training, a
#      loaded auto model scores with the reference ops), the recurrent-conv kernel through the whole model's
#      dispatch (tests/test_ops_triton_convlstm_rec.py), the graphed training / scoring paths
#      -> $OUT/pending/gpu_tests.txt
#   2. gpu_cli_defaults.sh without its tests: `mscred train` / `detect` with the defaults against plain PyTorch
#      -> $OUT/cli_defaults/cli.log
#   3. gpu_train_variants.sh: the graphed bf16 step, inference and end to end with MSCRED_CONVLSTM_REC=0 / 1
#      -> $OUT/rec_whole_model/{rec_off,rec_on}.md
# Usage (repository root, CUDA machine): bash benchmarks/gpu_pending_checks.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results}
export OUT PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT/pending"
{
  bash benchmarks/machine_info.sh
  timeout 150 python3 -m pytest -q -p no:cacheprovider -rs --durations=5 tests/test_detector.py \
    tests/test_ops_triton_convlstm_rec.py tests/test_train.py tests/test_forward_windows.py \
    -k "defaults or auto or rec or whole_model or full_size or graph" 2>&1
  echo "pytest exit code $?"
} > "$OUT/pending/gpu_tests.txt" 2>&1
tail -3 "$OUT/pending/gpu_tests.txt"
SKIP_TESTS=1 bash benchmarks/gpu_cli_defaults.sh | grep -E "^==|epoch seconds|wall|exit"
PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh rec_whole_model rec_off:g-fused-bf16 \
  rec_on:g-fused-bf16:MSCRED_CONVLSTM_REC=1
