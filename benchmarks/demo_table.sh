#!/usr/bin/env bash
# The README's "Detection quality" table on this machine: `mscred demo` (default), `--theta 0.005` and `--quick`,
# each with its wall and CPU time (/usr/bin/time's user + sys), its metrics.json (the mscred and random-baseline
# figures) and the machine's load before and after, so that the table's every cell rests on a file.
# Usage: bash benchmarks/demo_table.sh RESULT_DIR   (about 5-10 minutes on 2 idle cores; pass OMP_NUM_THREADS=1 on a
# shared box, as the README says)
set -euo pipefail
DIR=${1:?usage: bash benchmarks/demo_table.sh RESULT_DIR}
PY=${PY:-.venv/bin/python}
mkdir -p "$DIR"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (+ uncommitted changes under src/)')"
  echo "cpu: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | xargs), $(env -u OMP_NUM_THREADS nproc) usable cores"
  echo "torch: $($PY -c 'import torch; print(torch.__version__)')"
  echo "OMP_NUM_THREADS: ${OMP_NUM_THREADS:-unset}"
} > "$DIR/machine.txt"
run() {   # NAME ARGS...: one demo into a scratch folder; metrics.json, the terminal output and the times kept
  local name=$1; shift
  local scratch; scratch=$(mktemp -d)
  echo "load before $name: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$DIR/machine.txt"
  /usr/bin/time -f "wall %e s, user %U s, sys %S s, max RSS %M KB" -o "$DIR/$name.time" \
    "$PY" -m mscred demo --out "$scratch/out" "$@" > "$DIR/$name.log" 2>&1
  echo "load after $name: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$DIR/machine.txt"
  cp "$scratch/out/metrics.json" "$DIR/$name.metrics.json"
  rm -rf "$scratch"
}
run default
run theta --theta 0.005
run quick --quick
$PY - "$DIR" <<'PYEOF'
import json, pathlib, re, sys
d = pathlib.Path(sys.argv[1])
rows = ["| run | found | root causes in top 3 | point precision | point recall | point F1 | AUC-PR | wall / CPU time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |"]
def cells(m, prefix=""):
    g = lambda k: "-" if m.get(k) is None else f"{m[k]:.3f}"
    return [f"{m['events_found']}/{m['events_total']}", g("root_cause_recall_at_3"), g("precision"), g("recall"),
            g("f1"), g("auc_pr")]
for name in ("default", "theta", "quick"):
    m = json.loads((d / f"{name}.metrics.json").read_text())
    t = re.search(r"wall ([\d.]+) s, user ([\d.]+) s, sys ([\d.]+) s", (d / f"{name}.time").read_text())
    wall, cpu = float(t[1]), float(t[2]) + float(t[3])
    rows.append(f"| {name} | " + " | ".join(cells(m)) + f" | {wall:.0f} s / {cpu:.0f} s |")
    base = dict(m.get("random_baseline", {}), events_total=m["events_total"])
    base.setdefault("events_found", "-")
    rows.append(f"| random baseline of {name} | " + " | ".join(cells(base)) + " | |")
(d / "table.md").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
PYEOF
