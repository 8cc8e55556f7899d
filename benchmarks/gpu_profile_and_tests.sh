#!/usr/bin/env bash
# One device call (~8 min): GPU tests, where the graphed bf16 training step's time goes now, and the backward
# tiles sweep.
#   1. GPU tests (pytest arguments as given, cap TEST_TIMEOUT_S, default 200)                    -> gpu_tests.txt
#   2. profile_train_step.py: the eager step's kernels and ops, the graphed step's replays        -> train_step_profile.txt
#   3. bench_bwd_tiles.py: bias_act backward / small conv weight-gradient settings, graph-timed   -> bwd_tiles/
# Usage: bash benchmarks/gpu_profile_and_tests.sh NAME [pytest arguments...]. Writes $OUT/NAME.tgz.
set -uo pipefail
NAME=$1; shift
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
[ $# -gt 0 ] && bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "${TEST_TIMEOUT_S:-200}" "$@"
bench_to_log "$D" 150 benchmarks/profile_train_step.py
grep "^## " "$D/train_step_profile.txt"
bench_to_log "$D/bwd_tiles" 110 benchmarks/bench_bwd_tiles.py
grep -A60 "^Sums over" "$D/bwd_tiles/bwd_tiles.md" | sort -t'|' -k4 -n | head -8
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
