"""`mscred detect MODEL DIR` of a folder of a logger's rolled files against one `mscred detect FILE --context PREV`
per file, each a fresh process as a user's script runs them: FILES files of ROWS rows x SENSORS sensors (a tiny
model: channels 4/8/8/8, 1 epoch, CPU), timed alternately ROUNDS times. The per-file loop scores every row but the
first file's first ones too (each after its previous file), so both give the feed's scores; their largest relative
difference is printed (the float32 network's windows go through in other batches). Prints one JSON line:
    PYTHONPATH=src python3 benchmarks/bench_detect_folder.py [FILES] [ROWS]   (results/detect_folder/)"""
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_helpers import sensor_frame, tiny_model  # noqa: E402
from cli_timing import MSCRED, run  # noqa: E402

FILES = int(sys.argv[1]) if len(sys.argv) > 1 else 7
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
SENSORS, ROUNDS = 10, 3


with tempfile.TemporaryDirectory() as folder:
    root = Path(folder)
    frame = sensor_frame(600 + FILES * ROWS, SENSORS, seed=0)
    model = tiny_model(root / "model", frame.iloc[:600])
    (root / "feed").mkdir()
    files = [root / "feed" / f"day{k:02d}.csv" for k in range(FILES)]
    for k, path in enumerate(files):
        frame.iloc[600 + k * ROWS:600 + (k + 1) * ROWS].to_csv(path, index=False)
    one, each = [], []
    for r in range(ROUNDS):
        one.append(run(MSCRED + ["detect", model, root / "feed", "--out", root / "s.csv", "--device", "cpu"]))
        start = time.perf_counter()
        for k, path in enumerate(files):
            run(MSCRED + ["detect", model, path, "--out", root / f"d{k}.csv", "--device", "cpu"]
                + (["--context", files[k - 1]] if k else []))
        each.append(time.perf_counter() - start)
    folder_scores = pd.read_csv(root / "s.csv")["score"].to_numpy()
    loop_scores = pd.concat([pd.read_csv(root / f"d{k}.csv") for k in range(FILES)])["score"].to_numpy()
    scale = np.maximum(np.abs(loop_scores), 1e-12)
print(json.dumps({"files": FILES, "rows": ROWS, "sensors": SENSORS, "detect_folder_s": one,
                  "detect_per_file_s": each, "speedup_median": float(np.median(each) / np.median(one)),
                  "max_rel_diff": float(np.max(np.abs(folder_scores - loop_scores) / scale)),
                  "load1": os.getloadavg()[0]}))
