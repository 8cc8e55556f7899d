#!/usr/bin/env bash
# One device call (~5 min): the attention's backward folded into the Triton cell kernel too (levels 2-4; ATTN in
# convlstm_kernels.cell_bwd_kernel), measured against level 1 alone (the default then) and no fold.
#   1. GPU tests: tests/test_convlstm_attention.py (the cell kernel's fold at every level's size), the training rows of
#      tests/test_ops_triton_convlstm.py (the cell kernel's other callers)
#   2. env_ab.py: the graphed bf16 training step with MSCRED_LSTM_ATTN_FOLD = 0 / unset (level 1) / 1 (every level)
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_attn_fold_levels.sh NAME
set -uo pipefail
NAME=${1:-attn_fold_levels}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-240}" tests/test_convlstm_attention.py \
  tests/test_ops_triton_convlstm.py -k "attention or concat or time_major or opcheck or full_size or graph"
echo "tests done at ${SECONDS}s"
timeout 260 python3 benchmarks/env_ab.py --var MSCRED_LSTM_ATTN_FOLD --values 0,,1 --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -6 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
