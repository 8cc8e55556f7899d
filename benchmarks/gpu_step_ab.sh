#!/usr/bin/env bash
# One device call (~8 min): the graphed bf16 training step of this tree against an earlier one, in alternation with
# one eager baseline, and GPU tests.
#   bash benchmarks/gpu_step_ab.sh NAME TEST_TIMEOUT_S [pytest arguments...]
# The earlier tree is build/before/src (e.g. `rm -rf build/before; mkdir -p build/before; git archive REV src | tar
# -x -C build/before`), carried to the device. Writes $OUT/NAME.tgz: model/ (gpu_train_variants.sh's tables:
# before_1, after_1, before_2, after_2) and gpu_tests.txt.
set -uo pipefail
NAME=$1; LIMIT=$2; shift 2
. benchmarks/device_env.sh
cache_bytecode
D=$(result_dir "$NAME")
[ -d build/before/src ] || { echo "build/before/src missing"; exit 2; }
OUT="$D" PART_TIMEOUT_S=45 bash benchmarks/gpu_train_variants.sh model "before_1:g-fused-bf16:PYTHONPATH=build/before/src" \
  "after_1:g-fused-bf16" "before_2:g-fused-bf16:PYTHONPATH=build/before/src" "after_2:g-fused-bf16"
[ $# -gt 0 ] && bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" "$LIMIT" "$@"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
