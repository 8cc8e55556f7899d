"""Peak memory of one CPU training epoch against the sensor count: where detector.TRAIN_BYTES_PER_WINDOW_SENSOR2
comes from. Each size runs in a fresh process (ru_maxrss is a high-water mark).

    PYTHONPATH=src python3 benchmarks/measure_train_memory.py [--sensors 40 80] [--batch 32]
"""
from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = """
import resource, sys, time
import numpy as np, pandas as pd
from mscred import MSCRED
n, b = int(sys.argv[1]), int(sys.argv[2])
rows = 60 + 4 * 10 + 10 * (b + 8) * 2          # enough training windows for a full batch
X = pd.DataFrame(np.random.default_rng(0).standard_normal((rows, n)), columns=[f"s{i}" for i in range(n)])
start = time.time()
MSCRED(epochs=1, batch_size=b, device="cpu").fit(X)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"{n} sensors, batch {b}, {rows} rows: peak {peak / 1e9:.2f} GB, {time.time() - start:.1f} s")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, nargs="+", default=[40, 80])
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    for n in args.sensors:
        subprocess.run([sys.executable, "-c", CHILD, str(n), str(args.batch)], check=True)


if __name__ == "__main__":
    main()
