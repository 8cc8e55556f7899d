#!/usr/bin/env bash
# One device call (~6 min), written 2026-12-04 after that session's device time was spent, for the next one:
#   1. `mscred env`'s kernel report (conv_cell.is_backward_available's self-check now runs the folded attention
#      path too) -> NAME/env.txt
#   2. the GPU tests of what changed after the session's last GPU run: tests/test_ops_triton_attention.py and
#      tests/test_convlstm_attention.py (the attention kernels' loops share one jit helper, attention._step_tiles;
#      the forward's score partials are an output of the op, MSCRED_ATTN_SAVED_SCORES), tests/test_conv_cell.py's
#      backward rows (the self-check's Hopper test) -> NAME/gpu_tests.txt
#   3. the graphed bf16 training step with MSCRED_ATTN_SAVED_SCORES=0 / 1 in alternation (opt-in: the backward's
#      first attention kernel forms <H_k, dout> alone, 115 instead of 187 registers a thread by the sm_90 compile)
#      -> NAME/env_ab.md
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_next_1205.sh NAME
set -uo pipefail
NAME=${1:-next_1205}
. benchmarks/device_env.sh
mkdir -p "$OUT/$NAME"
timeout 150 python3 -m mscred.cli.main env > "$OUT/$NAME/env.txt" 2>&1
echo "env exit $? at ${SECONDS}s"; grep -i "conv + cell" "$OUT/$NAME/env.txt"
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-300} AB_TIMEOUT_S=200 bash benchmarks/gpu_tests_step_ab.sh "$NAME" \
  MSCRED_ATTN_SAVED_SCORES 0,1 3 tests/test_ops_triton_attention.py tests/test_convlstm_attention.py \
  tests/test_conv_cell.py -k "attention or backward or saved"
