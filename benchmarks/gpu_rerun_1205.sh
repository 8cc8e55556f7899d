#!/usr/bin/env bash
# One device call (~4 min), written in session 57 (2026-12-05) after the full suite on an H100 failed 19 tests, none
# in a kernel (results/gpu_suite_1205_h100/): three CLI tests compared a GPU run with a CPU reference, the rest met
# the device Python's older pandas. On the device's own Python, as the suite ran:
#   1. the files of those failures (and fleet-watch's, changed since), four pytest processes side by side
#                                                                                     -> NAME/tests_*.txt
#   2. conv1's weight-gradient tile (MSCRED_SMALL_CONV_WGRAD_TILE, BLOCK_P/warps/programs an SM) in one alternation
#      of 3 rounds on the graphed bf16 step: its kernel ran 82 us at the H100 step's tail, 42 of them alone
#      (results/timeline_1206/); its 128/4/2 default was chosen on the H200 against 128/4/4 and 128/4/8
#      (results/conv1_wgrad_share/); one program an SM lost there (small_conv_tiles2/)     -> NAME/env_ab.md
#   bash benchmarks/gpu_rerun_1205.sh NAME
set -uo pipefail
NAME=${1:-rerun_1205}
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/tests_1.txt" 300 tests/test_cli_messy.py tests/test_calibrate.py &
bash benchmarks/gpu_pytest.sh "$D/tests_2.txt" 300 tests/test_cli_fuzz.py tests/test_detect_context.py &
bash benchmarks/gpu_pytest.sh "$D/tests_3.txt" 300 tests/test_follow.py tests/test_cli_watch.py \
  tests/test_cli_fleet_watch.py &
bash benchmarks/gpu_pytest.sh "$D/tests_4.txt" 300 tests/test_report.py tests/test_sensor_scores.py &
wait
echo "tests done at ${SECONDS}s"; pack_result "$NAME"
timeout 200 python3 benchmarks/env_ab.py --rounds 3 --out "$D" --variant "defaults:" \
  --variant "tile_128_4_4:MSCRED_SMALL_CONV_WGRAD_TILE=128/4/4" \
  --variant "tile_64_4_4:MSCRED_SMALL_CONV_WGRAD_TILE=64/4/4" > "$D/step_log.txt" 2>&1
echo "A/B exit $? at ${SECONDS}s"; tail -6 "$D/env_ab.md"
pack_result "$NAME" && rm -rf "$OUT/$NAME"
