#!/usr/bin/env bash
# One device call (~4 min), written 2026-12-04 after that session's device time was spent, for the next one: the GPU
# tests of what changed after the session's last GPU run --
#   tests/test_ops_triton_attention.py and tests/test_convlstm_attention.py (the attention kernels' loops now share
#   one jit helper, attention._step_tiles; sm_90 registers and SASS counts were unchanged by the CPU compile),
#   tests/test_conv_cell.py's backward rows (conv_cell.is_backward_available's self-check now runs the folded
#   attention path too), and `mscred env`'s kernel report.
# Writes $OUT/NAME.tgz: NAME/{machine.txt, gpu_tests.txt, env.txt}.
#   bash benchmarks/gpu_next_1205.sh NAME
set -uo pipefail
NAME=${1:-next_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-330}" tests/test_ops_triton_attention.py \
  tests/test_convlstm_attention.py tests/test_conv_cell.py -k "attention or backward"
echo "tests done at ${SECONDS}s"
timeout 120 python3 -m mscred.cli.main env > "$D/env.txt" 2>&1
echo "env exit $? at ${SECONDS}s"; grep -i "conv + cell" "$D/env.txt"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
