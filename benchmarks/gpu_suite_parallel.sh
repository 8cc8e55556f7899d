#!/usr/bin/env bash
# One device call (~5 min): the whole test suite on the GPU machine, as six pytest processes side by side (in one
# process it ran past a 530 s cap, results/gpu_full_suite/: Triton and the im2col extension compile on the host's
# cores one at a time). Files split by their measured times: the fused ConvLSTM's (~210 s), the other Triton ops',
# training and im2col's, the CUDA build checks (nvcc on the standalone harness alone takes minutes with the other
# four compiling beside it: inside "rest" it pushed that group past its cap on 2026-11-30), and everything else.
# Writes $OUT/gpu_suite.tgz (gpu_suite/: one .txt a process and machine.txt; GPU_SUITE_PACK=0 leaves the folder
# $OUT/gpu_suite/ unpacked); the summary lines to the console.
# Usage (repository root, CUDA machine): bash benchmarks/gpu_suite_parallel.sh [group ...] (default: all six, as
# convlstm/3 triton_ops/2 train_im2col build rest_a/4 rest_b/2 -- rest_a in one process ran past its cap on
# 2026-12-02 (results/gpu_suite_1202b/), rest_b in one process that evening (results/gpu_suite_1202c/); "rest" is
# rest_a + rest_b in one process). A group NAME/N (convlstm/3) runs NAME's tests as N processes side by side,
# each a contiguous block of its test ids (contiguous, so that one test's parametrisations, which compile the same
# kernels, stay in one process); their files are NAME_1.txt .. NAME_N.txt.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D="$OUT/gpu_suite"; mkdir -p "$D"
CONVLSTM="tests/test_ops_triton_convlstm.py"
TRITON_OPS="tests/test_ops_triton_small_conv.py tests/test_ops_triton_attention.py tests/test_ops_triton_bias_act.py"
TRAIN_IM2COL="tests/test_train.py tests/test_ops_triton_train.py tests/test_ops_im2col.py tests/test_im2col_fast_paths.py"
BUILD="tests/test_im2col_build.py"
REST=$(ls tests/test_*.py | grep -v -F -x -e "$CONVLSTM" -e "$BUILD" $(for f in $TRITON_OPS $TRAIN_IM2COL; do echo "-e $f"; done))
# "rest" in one process ran past its 300 s cap on 2026-11-30 (results/scratch_hint/gpu_suite/): rest_a and rest_b
# take its files alternately, side by side.
REST_A=$(echo "$REST" | awk 'NR % 2 == 1'); REST_B=$(echo "$REST" | awk 'NR % 2 == 0')
GROUPS_RUN=${*:-convlstm/3 triton_ops/2 train_im2col build rest_a/4 rest_b/2}
# shard_ids K N IDS: the K-th (1-based) of N contiguous blocks of the test ids IDS (one a line).
shard_ids() {
  echo "$3" | awk -v k="$1" -v n="$2" '{ id[NR] = $0 } END { per = int((NR + n - 1) / n);
                                          for (i = (k - 1) * per + 1; i <= k * per && i <= NR; i++) print id[i] }'
}
SUMMARIES=""
for group in $GROUPS_RUN; do
  if [[ $group == */* ]]; then
    name=${group%/*}; n=${group#*/}
    case $name in convlstm) files=$CONVLSTM ;; triton_ops) files=$TRITON_OPS ;; train_im2col) files=$TRAIN_IM2COL ;;
      rest_a) files=$REST_A ;; rest_b) files=$REST_B ;;
      *) echo "no sharding for group $name" >&2; continue ;; esac
    # test ids once a group; rest_a / rest_b by whole files: some of their ids hold spaces, which the shell would split
    case $name in rest_*) ids=$(echo $files | tr ' ' '\n') ;;
      *) ids=$(python3 -m pytest --collect-only -q -p no:cacheprovider $files 2>/dev/null | grep '::') ;; esac
    for k in $(seq 1 "$n"); do
      bash benchmarks/gpu_pytest.sh "$D/${name}_$k.txt" 450 $(shard_ids "$k" "$n" "$ids") &
      SUMMARIES="$SUMMARIES ${name}_$k"
    done
    continue
  fi
  SUMMARIES="$SUMMARIES $group"
  case $group in
    # 296 s on 2026-12-01; on 2026-12-02 a cold machine cut it at 400 s after ~119 of 193 tests, and triton_ops
    # at 300 s after ~104 of 161 (results/final_1202/): with the model after it the call would pass 600 s, so
    # on a cold machine run the suite in a call of its own
    convlstm) bash benchmarks/gpu_pytest.sh "$D/convlstm.txt" 540 $CONVLSTM & ;;
    triton_ops) bash benchmarks/gpu_pytest.sh "$D/triton_ops.txt" 450 $TRITON_OPS & ;;
    train_im2col) bash benchmarks/gpu_pytest.sh "$D/train_im2col.txt" 300 $TRAIN_IM2COL & ;;
    build) bash benchmarks/gpu_pytest.sh "$D/build.txt" 450 $BUILD & ;;
    rest) bash benchmarks/gpu_pytest.sh "$D/rest.txt" 300 $REST & ;;
    rest_a) bash benchmarks/gpu_pytest.sh "$D/rest_a.txt" 300 $REST_A & ;;
    rest_b) bash benchmarks/gpu_pytest.sh "$D/rest_b.txt" 300 $REST_B & ;;
  esac
done
wait
for f in $SUMMARIES; do
  echo "$f: $(grep -E "passed|failed|error" "$D/$f.txt" | tail -1) ($(grep "pytest exit code" "$D/$f.txt"))"
done
# no FAILED / ERROR line is the good case: grep then exits 1, which must not be the call's status
grep -h -E "^(FAILED|ERROR) " "$D"/*.txt | head -20 || true
# the device tool brings back at most 8 files and the default groups write 13 (2026-12-02 evening: 12, the last four
# did not come back until the call was repeated into a packed folder): one archive, the machine header beside it
# (GPU_SUITE_PACK=0: leave the folder, for the scripts that call this one and pack their own folder)
if [ "${GPU_SUITE_PACK:-1}" != 0 ]; then
  bash benchmarks/machine_info.sh > "$D/machine.txt" 2>&1
  (cd "$OUT" && tar czf gpu_suite.tgz gpu_suite && rm -rf gpu_suite)
fi
