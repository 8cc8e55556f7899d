"""Peak memory of CPU training and of CPU scoring against the sensor count: where detector.TRAIN_BYTES_PER_WINDOW_
SENSOR2 and the CPU scoring batch (detector.inference_batch) come from. Each size runs in a fresh process
(ru_maxrss is a high-water mark).

    PYTHONPATH=src python3 benchmarks/measure_train_memory.py [--sensors 40 80] [--batch 32] [--micro-batch M]
    PYTHONPATH=src python3 benchmarks/measure_train_memory.py --score --sensors 80 --batch 128

Training: one epoch of ``MSCRED.fit`` (its validation and scoring passes included) at ``--batch``, in micro-batches
of ``--micro-batch`` windows when given. ``--score``: one no-grad forward of ``--batch`` windows of an untrained
network at the default channels (what scoring holds at a time), after the process's start-up.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

TRAIN = """
import resource, sys, time
import numpy as np, pandas as pd
from mscred import MSCRED
n, b = int(sys.argv[1]), int(sys.argv[2])
micro = int(sys.argv[3]) if sys.argv[3] != "none" else None
rows = 60 + 4 * 10 + 10 * (b + 8) * 2          # enough training windows for a full batch
X = pd.DataFrame(np.random.default_rng(0).standard_normal((rows, n)), columns=[f"s{i}" for i in range(n)])
start = time.time()
MSCRED(epochs=1, batch_size=b, micro_batch=micro, device="cpu").fit(X)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
passes = f", micro-batches of {micro}" if micro else ""
print(f"{n} sensors, batch {b}{passes}, {rows} rows: peak {peak / 1e9:.2f} GB, {time.time() - start:.1f} s")
"""

SCORE = """
import resource, sys, time
import torch
from mscred.config import ModelConfig
from mscred.model import MSCREDNet
n, b = int(sys.argv[1]), int(sys.argv[2])
net = MSCREDNet(ModelConfig(n_sensors=n, n_scales=3)).eval()
x = torch.randn(b, 5, 3, n, n)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start = time.time()
with torch.no_grad():
    net(x)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"{n} sensors, scoring {b} windows: peak {peak / 1e9:.2f} GB ({before / 1e9:.2f} GB before the forward, "
      f"its input {x.numel() * 4 / 1e9:.2f} GB), {time.time() - start:.1f} s")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, nargs="+", default=[40, 80])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=None)
    parser.add_argument("--score", action="store_true", help="measure one scoring forward instead of training")
    args = parser.parse_args()
    for n in args.sensors:
        if args.score:
            subprocess.run([sys.executable, "-c", SCORE, str(n), str(args.batch)], check=True)
        else:
            micro = "none" if args.micro_batch is None else str(args.micro_batch)
            subprocess.run([sys.executable, "-c", TRAIN, str(n), str(args.batch), micro], check=True)


if __name__ == "__main__":
    main()
