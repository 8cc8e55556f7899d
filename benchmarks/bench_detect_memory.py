"""Peak memory of scoring a long series with many sensors: in chunks of segments (the default) against one pass.

Trains a tiny model (small channels, 1 epoch) on ROWS_TRAIN rows of N sensors, then, each in a fresh process,
scores ROWS rows with ``MSCRED.decision_function``: once with the default ``STREAM_SEGMENT_BYTES`` and once with it
raised above the series' whole size (one pass, as before chunking). Reports the peak resident memory
(``resource.getrusage``, the child's) and the wall time of each, and checks that the scores agree.

Usage: PYTHONPATH=src python3 benchmarks/bench_detect_memory.py [--rows 100000] [--sensors 80] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, resource, sys, time
import numpy as np
from mscred import detector
from mscred.detector import MSCRED
model_dir, rows, sensors, one_pass, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
if one_pass:
    detector.STREAM_SEGMENT_BYTES = 1 << 62
model = MSCRED.load(model_dir, device="cpu")
rng = np.random.default_rng(1)
t = np.arange(rows)[:, None]
X = np.sin(t / (8 + np.arange(sensors)) + rng.uniform(0, 6, sensors)) + 0.05 * rng.standard_normal((rows, sensors))
start = time.perf_counter()
scores = model.decision_function(X)
np.save(out, scores)
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "segments": (rows - 60) // 10 + 1,
                  "chunk_segments": model._segments_per_chunk()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--sensors", type=int, default=80)
    ap.add_argument("--out", default="benchmarks/results/detect_memory")
    args = ap.parse_args()
    import numpy as np
    import torch

    from mscred.detector import MSCRED

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-detect-memory-"))
    rng = np.random.default_rng(0)
    t = np.arange(2_000)[:, None]
    train = np.sin(t / (8 + np.arange(args.sensors)) + rng.uniform(0, 6, args.sensors))
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu").fit(train).save(work / "model")
    rows = {}
    for label, one_pass in (("chunks (default)", "0"), ("one pass", "1")):
        result = subprocess.run([sys.executable, "-c", CHILD, str(work / "model"), str(args.rows), str(args.sensors),
                                 one_pass, str(work / f"{one_pass}.npy")], capture_output=True, text=True, check=True)
        rows[label] = json.loads(result.stdout.strip().splitlines()[-1])
        print(label, rows[label], flush=True)
    a, b = np.load(work / "0.npy"), np.load(work / "1.npy")
    agree = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))
    meta = (f"torch {torch.__version__}, {time.strftime('%Y-%m-%d')}, CPU. {args.rows:,} rows x {args.sensors} "
            f"sensors, tiny model (channels 4/8/8/8). Command: `PYTHONPATH=src python3 benchmarks/bench_detect_memory.py "
            f"--rows {args.rows} --sensors {args.sensors}`.")
    lines = ["# Scoring a long series: peak memory in chunks of segments against one pass", "", meta, "",
             "| scoring | segments | segments per chunk | peak RSS (MB) | seconds |", "| --- | --- | --- | --- | --- |"]
    for label, r in rows.items():
        lines.append(f"| {label} | {r['segments']:,} | {r['chunk_segments'] if label.startswith('chunks') else 'all'}"
                     f" | {r['peak_rss_mb']:,.0f} | {r['seconds']:.1f} |")
    lines += ["", f"Largest relative difference of the scores: {agree:.1e}."]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "detect_memory.md").write_text("\n".join(lines) + "\n")
    (out / "detect_memory.json").write_text(json.dumps({"meta": meta, "rows": rows, "max_rel_diff": agree}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
