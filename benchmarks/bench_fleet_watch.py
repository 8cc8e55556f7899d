"""One ``mscred fleet-watch`` against one ``mscred watch`` per entity: ENTITIES entities of SENSORS sensors (one model
of the default architecture, trained 1 epoch on 2,000 rows and copied to each entity), each file ROWS rows, every
run ending at once (``--idle-exit 0``). Prints the wall time and the largest resident memory of each process
(``getrusage`` of the children, one process at a time): the watches' memory, were they running side by side, is
their sum. One run each:
    PYTHONPATH=src python3 benchmarks/bench_fleet_watch.py [ENTITIES] [SENSORS] [ROWS]   (results/fleet_watch/)"""
import datetime
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_helpers import sensor_frame  # noqa: E402

from mscred import MSCRED  # noqa: E402

ENTITIES = int(sys.argv[1]) if len(sys.argv) > 1 else 8
SENSORS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 2000


def run(*argv: str) -> tuple[float, float]:
    """(seconds, peak resident MB) of ``mscred ARGV`` in a process of its own."""
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mscred", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def main() -> None:
    feed = sensor_frame(2000 + ROWS, SENSORS, seed=4)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        MSCRED(epochs=1, device="cpu", progress=False).fit(feed.iloc[:2000]).save(root / "fleet/models/e0")
        (root / "live").mkdir()
        for i in range(ENTITIES):
            if i:
                shutil.copytree(root / "fleet/models/e0", root / f"fleet/models/e{i}")
            feed.iloc[2000:].to_csv(root / f"live/e{i}.csv", index=False)
        each = [run("watch", str(root / f"fleet/models/e{i}"), str(root / f"live/e{i}.csv"), "--out",
                    str(root / f"w{i}.csv"), "--device", "cpu", "--idle-exit", "0") for i in range(ENTITIES)]
        fleet = run("fleet-watch", str(root / "fleet"), str(root / "live"), "--out", str(root / "out"),
                    "--device", "cpu", "--idle-exit", "0")
    print(f"# {ENTITIES} entities x {ROWS:,} rows of {SENSORS} sensors, default architecture, --idle-exit 0, CPU "
          f"({os.cpu_count()} cores), torch {torch.__version__}, {datetime.date.today()}")
    print(f"one watch per entity: {sum(t for t, _ in each):.1f} s in all, {max(m for _, m in each):.0f} MB peak "
          f"each ({sum(m for _, m in each):.0f} MB side by side)")
    print(f"one fleet-watch: {fleet[0]:.1f} s, {fleet[1]:.0f} MB peak")


if __name__ == "__main__":
    main()
