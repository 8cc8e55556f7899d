"""`mscred fleet-detect` against one `mscred detect` per entity, each a fresh process as a user's script runs them:
ENTITIES tiny models (channels 4/8/8/8, 1 epoch, CPU) and new tables of ROWS rows x SENSORS sensors, timed
alternately ROUNDS times; the scores of both are compared (identical). Prints one JSON line:
    PYTHONPATH=src python3 benchmarks/bench_fleet_detect.py [ENTITIES] [ROWS]   (results/fleet_detect/)"""
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

ENTITIES = int(sys.argv[1]) if len(sys.argv) > 1 else 8
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
SENSORS, ROUNDS = 10, 3


with tempfile.TemporaryDirectory() as folder:
    root = Path(folder)
    for k in range(ENTITIES):
        frame = sensor_frame(600 + ROWS, SENSORS, seed=k)
        tiny_model(root / "fleet" / "models" / f"e{k}", frame.iloc[:600])
        (root / "new").mkdir(exist_ok=True)
        frame.iloc[600:].to_csv(root / "new" / f"e{k}.csv", index=False)
    one, each = [], []
    for r in range(ROUNDS):
        one.append(run(MSCRED + ["fleet-detect", root / "fleet", root / "new", "--out", root / "s", "--device", "cpu",
                                 "--quiet"]))
        start = time.perf_counter()
        for k in range(ENTITIES):
            run(MSCRED + ["detect", root / "fleet" / "models" / f"e{k}", root / "new" / f"e{k}.csv", "--out",
                          root / f"d{k}.csv", "--device", "cpu"])
        each.append(time.perf_counter() - start)
    same = all(np.array_equal(pd.read_csv(root / "s" / "scores" / f"e{k}.csv")["score"],
                              pd.read_csv(root / f"d{k}.csv")["score"]) for k in range(ENTITIES))
print(json.dumps({"entities": ENTITIES, "rows": ROWS, "sensors": SENSORS, "fleet_detect_s": one,
                  "detect_per_entity_s": each, "speedup_median": float(np.median(each) / np.median(one)),
                  "identical_scores": same, "load1": os.getloadavg()[0]}))
