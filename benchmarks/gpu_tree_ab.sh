#!/usr/bin/env bash
# One device call: the working tree against an older one (OLD_SRC, default build/old_tree/src: made by
# `git archive <commit> src | tar -x -C build/old_tree`, carried), for a change that has no switch of its own
# (first: level 1's step kernel reading x from the encoder's images, results/conv_cell_x_read/).
# Builds both trees' CUDA extensions at once (an untimed step each, TORCH_EXTENSIONS_DIR apart), runs TESTS (default
# the conv + cell kernel's and the weight-gradient stream's) on the working tree, then times the graphed step in
# alternation, ROUNDS rounds, each variant in a process of its own (graphed_step_ms.py).
# BEFORE_TIMING: a command run after the tests (e.g. launch-setting sweeps); NEW_ENV_FILE: VAR=VALUE lines set for
# the new tree's timed runs only (read when the timing starts: a sweep may write it).
# Writes $OUT/NAME/: build_*.txt, gpu_tests.txt, times.jsonl, summary.md.
#   bash benchmarks/gpu_tree_ab.sh NAME
set -uo pipefail
NAME=${1:-tree_ab}
. benchmarks/device_env.sh
OLD_SRC=${OLD_SRC:-build/old_tree/src}
D=$(result_dir "$NAME")
build() {  # build TREE_SRC EXT_DIR LOG: one untimed run builds every extension the step uses (and Triton's cache)
  TORCH_EXTENSIONS_DIR=$2 PYTHONPATH=$1 timeout 300 python3 benchmarks/graphed_step_ms.py --label warm > "$3" 2>&1
  echo "build $1: exit $?" >> "$3"
}
build src /tmp/ext_new "$D/build_new.txt" &
build "$OLD_SRC" /tmp/ext_old "$D/build_old.txt" &
wait
echo "builds done at ${SECONDS}s"; tail -qn1 "$D"/build_*.txt
TORCH_EXTENSIONS_DIR=/tmp/ext_new timeout "${TEST_TIMEOUT_S:-240}" python3 -m pytest -q -x -p no:cacheprovider \
  ${TESTS:-tests/test_conv_cell.py tests/test_wgrad_stream.py} > "$D/gpu_tests.txt" 2>&1
echo "tests exit $? at ${SECONDS}s"; tail -3 "$D/gpu_tests.txt"
if [ -n "${BEFORE_TIMING:-}" ]; then bash -c "$BEFORE_TIMING"; echo "before-timing exit $? at ${SECONDS}s"; fi
NEW_ENV=""
if [ -n "${NEW_ENV_FILE:-}" ] && [ -f "$NEW_ENV_FILE" ]; then NEW_ENV=$(tr '\n' ' ' < "$NEW_ENV_FILE"); fi
echo "new tree's extra environment: ${NEW_ENV:-none}" | tee "$D/new_env.txt"
for r in $(seq "${ROUNDS:-3}"); do
  for v in old new; do
    src=src; [ "$v" = old ] && src=$OLD_SRC
    extra=""; [ "$v" = new ] && extra=$NEW_ENV
    env $extra TORCH_EXTENSIONS_DIR=/tmp/ext_$v PYTHONPATH=$src timeout 120 python3 benchmarks/graphed_step_ms.py --label "$v" \
      2>> "$D/timing_stderr.txt" | tail -1 >> "$D/times.jsonl"
  done
done
python3 - "$D" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
rows = [json.loads(line) for line in (d / "times.jsonl").read_text().splitlines() if line.strip()]
lines = ["| variant | ms a step, per round | loss |", "| --- | --- | --- |"]
for v in ("old", "new"):
    mine = [r for r in rows if r["label"] == v]
    ms = " / ".join("%.3f" % r["ms"] for r in mine)
    lines.append(f"| {v} | {ms} | {mine[-1]['loss'] if mine else '-'} |")
(d / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "done at ${SECONDS}s"
