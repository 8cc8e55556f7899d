#!/usr/bin/env bash
# One device call (~4 min): the whole test suite on the GPU machine, as four pytest processes side by side (in one
# process it ran past a 530 s cap, results/gpu_full_suite/: Triton and the im2col extension compile on the host's
# cores one at a time). Files split by their measured times: the fused ConvLSTM's (~180 s), the other Triton ops',
# training and im2col's, and everything else.
# Writes $OUT/gpu_suite/{convlstm,triton_ops,train_im2col,rest}.txt; the summary lines to the console.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_suite_parallel.sh
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/gpu_suite"; mkdir -p "$D"
CONVLSTM="tests/test_ops_triton_convlstm.py"
TRITON_OPS="tests/test_ops_triton_small_conv.py tests/test_ops_triton_attention.py tests/test_ops_triton_bias_act.py"
TRAIN_IM2COL="tests/test_train.py tests/test_ops_triton_train.py tests/test_ops_im2col.py tests/test_im2col_fast_paths.py"
REST=$(ls tests/test_*.py | grep -v -F -x -e "$CONVLSTM" $(for f in $TRITON_OPS $TRAIN_IM2COL; do echo "-e $f"; done))
bash benchmarks/gpu_pytest.sh "$D/convlstm.txt" 300 $CONVLSTM &
bash benchmarks/gpu_pytest.sh "$D/triton_ops.txt" 300 $TRITON_OPS &
bash benchmarks/gpu_pytest.sh "$D/train_im2col.txt" 300 $TRAIN_IM2COL &
bash benchmarks/gpu_pytest.sh "$D/rest.txt" 300 $REST &
wait
for f in convlstm triton_ops train_im2col rest; do
  echo "$f: $(grep -E "passed|failed|error" "$D/$f.txt" | tail -1) ($(grep "pytest exit code" "$D/$f.txt"))"
done
grep -h -E "^(FAILED|ERROR) " "$D"/*.txt | head -20
