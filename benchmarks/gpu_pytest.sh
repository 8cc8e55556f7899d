#!/usr/bin/env bash
# The GPU-test step of the device scripts: the machine header (machine_info.sh), pytest under a time cap and its
# exit code, all into FILE; the last lines to the console. Environment variables set on the call reach pytest.
#   bash benchmarks/gpu_pytest.sh FILE TIMEOUT_S [pytest arguments...]
set -uo pipefail
FILE=$1; LIMIT=$2; shift 2
mkdir -p "$(dirname "$FILE")"
{
  bash benchmarks/machine_info.sh
  timeout "$LIMIT" python3 -m pytest -q -p no:cacheprovider -rs -o faulthandler_timeout=60 --durations=5 "$@" 2>&1
  echo "pytest exit code $?"
} > "$FILE" 2>&1
tail -4 "$FILE"
