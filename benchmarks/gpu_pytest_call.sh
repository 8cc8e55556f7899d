#!/usr/bin/env bash
# One device call of GPU tests only: the machine header, pytest under a cap (gpu_pytest.sh), the results packed.
#   bash benchmarks/gpu_pytest_call.sh NAME CAP_S [pytest arguments...]
# Writes $OUT/NAME.tgz (NAME/machine.txt, NAME/gpu_tests.txt). Its calls: gpu_train_tests.sh,
# gpu_transpose_taps_tests.sh.
set -uo pipefail
NAME=$1; CAP=$2; shift 2
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "$CAP" "$@"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
