#!/usr/bin/env bash
# One device call (~5 min): level 1's attention backward folded into the ConvLSTM backward
# (ops/triton/convlstm_attention.py, attention_last.py, conv_cell_bwd.cu's attn_* parameters; MSCRED_LSTM_ATTN_FOLD).
#   1. GPU tests: tests/test_convlstm_attention.py (the step kernel making dout_t against the float64 oracle within
#      the unfolded path's error), tests/test_conv_cell.py's backward and training rows (the kernel's other callers)
#   2. env_ab.py: the graphed bf16 training step with MSCRED_LSTM_ATTN_FOLD=0 / unset (the default: level 1 folded)
#      in alternation
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env_ab.md, step_log.txt}.
#   bash benchmarks/gpu_attn_fold.sh NAME
set -uo pipefail
NAME=${1:-attn_fold}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-330}" tests/test_convlstm_attention.py \
  tests/test_conv_cell.py -k "attention or backward or training or step_outputs"
echo "tests done at ${SECONDS}s"
timeout 220 python3 benchmarks/env_ab.py --var MSCRED_LSTM_ATTN_FOLD --values 0, --rounds 3 --out "$D" \
  > "$D/step_log.txt" 2>&1
echo "step A/B exit $? at ${SECONDS}s"; tail -5 "$D/env_ab.md"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
