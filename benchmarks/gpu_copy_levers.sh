#!/usr/bin/env bash
# One device call (~8 min), written 2026-12-04 (night) without device time, for the next session: the two levers
# that remove copies instead of speeding them up, both opt-in until this call measures them.
#   MSCRED_ENCODER_XH=1     conv1's and conv2's epilogues store levels 1-2 into their ConvLSTM's [x, h] buffers too
#                           (ops/encoder_xh.py): the x copies and h_{-1} fills go
#   MSCRED_ATTENTION_CAT=1  levels 1-3's attention outputs written into the decoder's concatenations
#                           (ops/attention_cat.py): the three skip copies go
#   1. their GPU tests (the bf16 model at n = 30 takes each path, the same loss and gradients as off), with those of
#      the ops whose code they touched (the attention ops' new flag, bias + SELU's kernels split in two)
#      -> NAME/gpu_tests.txt; the graphed full-size training steps of tests/test_train.py with both on
#      -> NAME/gpu_tests_train.txt
#   2. the graphed bf16 step with each switch 0 / 1 in alternation, 4 rounds -> NAME/encoder_xh/env_ab.md,
#      NAME/attention_cat/env_ab.md
# The time line with the winners on is then gpu_next_1207.sh's (run it with them set).
# Comes back as $OUT/NAME.tgz.   bash benchmarks/gpu_copy_levers.sh NAME
set -uo pipefail
NAME=${1:-copy_levers}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_encoder_xh.py tests/test_attention_cat.py \
  tests/test_ops_triton_attention.py tests/test_convlstm_attention.py tests/test_ops_triton_bias_act.py
MSCRED_ENCODER_XH=1 MSCRED_ATTENTION_CAT=1 bash benchmarks/gpu_pytest.sh "$D/gpu_tests_train.txt" 150 \
  tests/test_train.py -k "cuda_graph_full_size"
echo "tests done at ${SECONDS}s"
for VAR in MSCRED_ENCODER_XH MSCRED_ATTENTION_CAT; do
  SUB=$(echo "${VAR#MSCRED_}" | tr 'A-Z' 'a-z')
  timeout 130 python3 benchmarks/env_ab.py --var "$VAR" --values 0,1 --rounds 4 --out "$D/$SUB" \
    > "$D/${SUB}_log.txt" 2>&1
  echo "$VAR A/B exit $? at ${SECONDS}s"; tail -3 "$D/$SUB/env_ab.md"
done
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
