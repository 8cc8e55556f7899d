"""What reading decimal commas costs: `load_table` of a ';'-separated table written with points against the same
table written with decimal commas (ROWS x COLS normal floats as pandas writes them), timed alternately ROUNDS
times in this process; checks the two give the same values, bit for bit. Prints one JSON line:
    PYTHONPATH=src python3 benchmarks/bench_decimal_comma.py [ROWS] [COLS]   (results/decimal_comma/)"""
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mscred.data.io import load_table

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
COLS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ROUNDS = 3

with tempfile.TemporaryDirectory() as folder:
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(ROWS, COLS)), columns=[f"s{i}" for i in range(COLS)])
    points, commas = Path(folder) / "points.csv", Path(folder) / "commas.csv"
    frame.to_csv(points, sep=";", index=False)
    frame.to_csv(commas, sep=";", decimal=",", index=False)
    times = {"points": [], "commas": []}
    for _ in range(ROUNDS):
        for name, path in (("points", points), ("commas", commas)):
            start = time.perf_counter()
            table = load_table(path)
            times[name].append(round(time.perf_counter() - start, 3))
    same = bool(np.array_equal(load_table(points).values, load_table(commas).values))
print(json.dumps({"rows": ROWS, "cols": COLS, "seconds": times, "same_values": same, "pandas": pd.__version__}))
