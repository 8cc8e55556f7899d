"""How long a row appended to a watched CSV takes to reach SCORES.csv (``mscred watch``): a model of the default
architecture (trained 1 epoch on TRAIN rows of SENSORS sensors) in a ``mscred watch`` process with ``--interval``
INTERVAL; after the first window's rows, ROWS rows are appended one at a time, every GAP_S seconds, and each row's
latency is the time from its write to its line in SCORES.csv (the file polled every 2 ms). Prints the median, the
95th percentile and the largest, for each interval:
    PYTHONPATH=src python3 benchmarks/bench_watch_latency.py [SENSORS] [ROWS]   (results/watch_latency/)"""
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_helpers import sensor_frame  # noqa: E402

from mscred import MSCRED  # noqa: E402

SENSORS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 40
TRAIN, GAP_S = 2000, 0.3


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def watch_latencies(model_dir: Path, feed, folder: Path, interval: float) -> list[float]:
    data, out = folder / f"feed_{interval}.csv", folder / f"scores_{interval}.csv"
    start = 120   # more than one window's rows: every appended row is scored as it comes
    data.write_text(feed.iloc[:start].to_csv(index=False))
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "mscred", "watch", str(model_dir), str(data), "--out", str(out),
                             "--device", "cpu", "--interval", str(interval), "--idle-exit", "5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    while lines(out) < start + 1:          # the header and the first rows: started and scored
        time.sleep(0.01)
    took = []
    for i in range(start, start + ROWS):
        text = feed.iloc[i:i + 1].to_csv(index=False, header=False)
        with open(data, "a") as handle:
            handle.write(text)
        written = time.perf_counter()
        while lines(out) < i + 2:
            time.sleep(0.002)
        took.append(time.perf_counter() - written)
        time.sleep(GAP_S)
    proc.wait(timeout=60)
    return took


frame = sensor_frame(TRAIN + 400, SENSORS, seed=0)
with tempfile.TemporaryDirectory() as folder:
    root = Path(folder)
    MSCRED(epochs=1, device="cpu").fit(frame.iloc[:TRAIN]).save(root / "model")
    feed = frame.iloc[TRAIN:].reset_index(drop=True)
    print(f"{datetime.date.today()}, {os.cpu_count()} CPU cores, torch {torch.__version__}; {SENSORS} sensors, "
          f"default architecture, {ROWS} rows appended one at a time every {GAP_S} s\n")
    print("| --interval | median ms | 95th percentile ms | largest ms |")
    print("| ---: | ---: | ---: | ---: |")
    for interval in (0.1, 1.0):
        took = sorted(watch_latencies(root / "model", feed, root, interval))
        p95 = took[min(len(took) - 1, round(0.95 * (len(took) - 1)))]
        print(f"| {interval} | {1e3 * statistics.median(took):.0f} | {1e3 * p95:.0f} | {1e3 * took[-1]:.0f} |")
