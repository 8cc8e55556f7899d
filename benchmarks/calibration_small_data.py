"""How many normal rows the default threshold flags when the training table is small (CPU; evidence for the
CalibrationWarning's minimum, ``detector.MIN_VALIDATION_WINDOWS`` = 3 today).

Normal data: 8 sensors, each two sines (periods 2 pi (10 + 3i) and 2 pi (37 + i) rows) plus noise 0.1, seeded.
For each training size a small model (channels 8/16/16/16, 3 epochs, the default signature, score and beta_max
threshold) is fitted on the first ROWS rows, then asked about 2,000 later rows of the same process (normal, but
partly phases of the slow sines the training never saw) and about its own training rows. Reported per size and
seed: validation windows (the last 25% of the windows, which set the threshold), the fraction of held-out and of
training rows flagged. Synthetic data, not a real plant's: read it as the shape of the dependence, not its numbers.

Usage: PYTHONPATH=src python3 benchmarks/calibration_small_data.py [--out DIR] [--seeds N]
Writes DIR/calibration_small_data.md and .json.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import warnings

import numpy as np
import pandas as pd
import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)

SIZES = (300, 400, 600, 1000, 2000, 4000)


def normal(rows: int, seed: int, start: int = 0, sensors: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(start, start + rows)[:, None]
    i = np.arange(sensors)
    values = np.sin(t / (10 + 3 * i)) + 0.3 * np.sin(t / (37 + i)) + 0.1 * rng.standard_normal((rows, sensors))
    return pd.DataFrame(values, columns=[f"s{k}" for k in range(sensors)])


def main() -> None:
    import mscred
    from mscred.detector import MSCRED

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/calibration_small_data")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    meta = (f"mscred {mscred.__version__}, torch {torch.__version__}, {platform.machine()} CPU, "
            f"{datetime.date.today()}. Command: `PYTHONPATH=src python3 benchmarks/calibration_small_data.py "
            f"--seeds {args.seeds}`.")
    rows = []
    lines = ["# Normal rows flagged by the default threshold, by training size", "", meta, "",
             "| training rows | windows (validation) | held-out normal rows flagged, per seed "
             "| training rows flagged |",
             "| --- | --- | --- | --- |"]
    for size in SIZES:
        held, train, counts = [], [], ""
        for seed in range(args.seeds):
            model = MSCRED(epochs=3, channels=(8, 16, 16, 16), device="cpu", progress=False, seed=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (the CalibrationWarning below 3 validation windows: not here)
                model.fit(normal(size, seed))
            windows = model.window_of_row(size)
            n_windows = int(windows.max()) + 1
            n_val = len(set(windows[model.validation_rows_].tolist()))
            counts = f"{n_windows} ({n_val})"
            held.append(float(np.mean(model.predict(normal(2000, seed + 100, start=size)))))
            train.append(float(np.mean(model.labels_)))
        rows.append(dict(rows=size, windows=n_windows, validation_windows=n_val, held_out_flagged=held,
                         training_flagged=train))
        lines.append(f"| {size} | {counts} | {' / '.join(f'{h:.1%}' for h in held)} | "
                     f"{' / '.join(f'{t:.1%}' for t in train)} |")
    sweep_report.write(args.out, "calibration_small_data", meta, rows, lines)


if __name__ == "__main__":
    main()
