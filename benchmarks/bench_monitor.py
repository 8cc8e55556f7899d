"""What one ``Monitor.update`` costs on this machine's CPU, by chunk size: a model of the default architecture
(trained 1 epoch, so the timing is that of a real network's scoring) on SENSORS sensors, fed ROWS rows after its
training rows in chunks of 1, 10, 100 and 1,000 rows. Per chunk size: the median milliseconds an update takes and
the rows scored per second; the scores of chunk sizes of a multiple of the gap are compared with those of 1,000-row
chunks (the same rows in the same windows once the tail is full). Prints a Markdown table:
    PYTHONPATH=src python3 benchmarks/bench_monitor.py [SENSORS] [ROWS]   (results/monitor/)"""
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_helpers import sensor_frame  # noqa: E402

from mscred import MSCRED, __version__  # noqa: E402

SENSORS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
TRAIN = 2000

frame = sensor_frame(TRAIN + ROWS, SENSORS, seed=0)
model = MSCRED(epochs=1, device="cpu").fit(frame.iloc[:TRAIN])
feed = frame.iloc[TRAIN:].reset_index(drop=True)
print(f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
      f"torch {torch.__version__}, mscred {__version__}; {SENSORS} sensors, {ROWS} rows after {TRAIN} of training, "
      "default architecture\n")
print("| rows a chunk | median ms an update | rows/s | largest score difference from 1,000-row chunks |")
print("| ---: | ---: | ---: | ---: |")
scores = {}
for chunk in (1000, 100, 10, 1):
    monitor, took, got = model.monitor(), [], []
    for a in range(0, ROWS, chunk):
        start = time.perf_counter()
        got.append(monitor.update(feed.iloc[a:a + chunk])["score"].to_numpy())
        took.append(time.perf_counter() - start)
    scores[chunk] = np.concatenate(got)
    # Rows scored as soon as they come (every chunk size) only once the tail holds a window's rows
    settled = slice(model.min_rows + 1000, None)
    diff = np.abs(scores[chunk][settled] - scores[1000][settled]).max()
    # The windows are counted back from each chunk's last row: chunks of a multiple of gap rows give every row the
    # same window; a chunk of one row is scored by the window that ends at it, another window for most rows
    same = f"{diff:.2e}" if chunk % model.config_.signature.gap == 0 else "other windows (each ends at its row)"
    print(f"| {chunk} | {1e3 * statistics.median(took):.2f} | {ROWS / sum(took):,.0f} | {same} |")
