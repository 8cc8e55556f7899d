"""What ``mscred watch --new-only`` saves on a long log: ``mscred watch ... --idle-exit 0`` over a CSV of ROWS rows of
SENSORS sensors (a model of the default architecture, trained 1 epoch on 2,000 rows), once scoring every row and
once with ``--new-only`` (the rows read and checked as history, none scored); each run's wall time, the process's
start (Python, torch, the model) included. One run each:
    PYTHONPATH=src python3 benchmarks/bench_watch_new_only.py [SENSORS] [ROWS]   (results/watch_new_only/)"""
import datetime
import os
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
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 20000


def timed_watch(model_dir: Path, data: Path, out: Path, *options: str) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mscred", "watch", str(model_dir), str(data), "--out", str(out),
                    "--device", "cpu", "--idle-exit", "0", *options], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    feed = sensor_frame(2000 + ROWS, SENSORS, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model_dir = folder / "model"
        MSCRED(epochs=1, device="cpu", progress=False).fit(feed.iloc[:2000]).save(model_dir)
        data = folder / "feed.csv"
        feed.iloc[2000:].to_csv(data, index=False)
        every = timed_watch(model_dir, data, folder / "every.csv")
        new_only = timed_watch(model_dir, data, folder / "new.csv", "--new-only")
    print(f"# mscred watch --idle-exit 0 over {ROWS:,} rows of {SENSORS} sensors, default architecture, CPU "
          f"({os.cpu_count()} cores), torch {torch.__version__}, {datetime.date.today()}")
    print(f"every row scored: {every:.1f} s")
    print(f"--new-only (the rows taken as history): {new_only:.1f} s")


if __name__ == "__main__":
    main()
