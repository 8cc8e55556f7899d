#!/usr/bin/env bash
# One device call (~6 min, the session's last device minutes): the window-resident ConvLSTM kernel with its first
# step pipelined (the next unit's input gates loaded before this unit's update, as the t > 0 units' loads overlap
# their MMAs):
#   1. its GPU tests                                                                 -> gpu_tests.txt
#   2. each level alone, resident and per-step timed (bench_resident_lstm.py)        -> resident_lstm.{md,json}
#   3. the whole model, one run (bench_train.py's graphed bf16 part)                 -> resident_4.md
# Writes $OUT/resident_round4.tgz.
set -uo pipefail
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir resident_round4)
python3 -c "from mscred.ops import resident_lstm; resident_lstm._extension()" > "$D/build.txt" 2>&1
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 150 tests/test_resident_lstm.py
bench_to_log "$D" 80 benchmarks/bench_resident_lstm.py --timed "resident,per step"
grep -E "^\| (scoring|1,024|batch)" "$D/resident_lstm.md"
OUT="$D" bash benchmarks/gpu_train_variants.sh . "resident_4:g-fused-bf16"
(cd "$OUT" && tar czf resident_round4.tgz resident_round4 && rm -rf resident_round4)
