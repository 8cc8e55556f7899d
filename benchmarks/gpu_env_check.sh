#!/usr/bin/env bash
# One device call (~1-2 min): `mscred env` and the GPU run of its test (and of any other pytest arguments given),
# packed as $OUT/NAME.tgz: NAME/{machine.txt, env.txt, gpu_tests.txt}.
#   bash benchmarks/gpu_env_check.sh NAME [more pytest arguments...]
# results/memsets_env/ ran: bash benchmarks/gpu_env_check.sh memsets_env tests/test_graph_memsets.py -k "switch or env"
set -uo pipefail
NAME=$1; shift
. benchmarks/device_env.sh
D=$(result_dir "$NAME")
timeout 250 python3 -m mscred.cli.main env > "$D/env.txt" 2>&1
echo "env exit $?"; grep -i "graph memsets\|conv + cell\|packed" "$D/env.txt"
bash benchmarks/gpu_pytest.sh "$D/gpu_tests.txt" 200 tests/test_cli.py::test_env_lists_backends "$@"
(cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME")
