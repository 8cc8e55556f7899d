"""Which score setting the demo can stand on: the demo's pipeline on several seeds, scored several ways (CPU).

For each seed, the paper's synthetic data is generated and one MSCRED is trained as ``mscred demo`` trains it
(``--epochs``, 3 by default). The same trained network then scores the test part with each setting below, each
calibrated on the same validation windows (the last quarter of the training windows) with 1.5 x max:

- ``paper``     count of residual entries above theta = 0.005 on w = 10 (the paper's scoring)
- ``count-q``   count above theta = the 0.99 quantile of the validation residuals (``--theta auto``)
- ``mse``       mean residual on w = 10
- ``z_sensor``  per-sensor residual row sums standardised by their validation mean/std, the largest (default)

Figures per setting and seed: anomalies found (of 5), root-cause recall@3, point precision/recall/F1 (no point
adjustment), the same definitions as ``mscred evaluate``. Writes ``results/demo_scores.{json,md}``.

    .venv/bin/python benchmarks/demo_scores.py --seeds 0 1 2 --epochs 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from mscred import __version__
from mscred import metrics as M
from mscred.atomic import atomic_path
from mscred.config import ScoreConfig
from mscred.data.synthetic import generate_synthetic
from mscred.detect import Calibration, score_windows, timestamp_windows
from mscred.detector import MSCRED

RESULTS = Path(__file__).parent / "results"
SETTINGS = {
    "paper": dict(method="count", theta=0.005),
    "count-q": dict(method="count", theta=None),
    "mse": dict(method="mse"),
    "z_sensor": dict(method="z_sensor"),
}


def run_seed(seed: int, epochs: int, length: int) -> dict:
    data = generate_synthetic(length=length, seed=seed)
    t0 = time.perf_counter()
    model = MSCRED(epochs=epochs, seed=seed, device="cpu", progress=False).fit(data.train)
    train_s = time.perf_counter() - t0
    sig, steps = model.config.signature, model.config.signature.steps
    # The validation windows exactly as fit split them.
    train_seg = model._segments(model._aligned(model._table(data.train)))
    n_windows = len(train_seg) - steps + 1
    n_val = min(max(int(round(n_windows * model.config.train.val_fraction)), 1), n_windows - 1)
    val_seg = train_seg[n_windows - n_val:]
    val = (val_seg[steps - 1:], model._reconstruct(val_seg))
    test_table = model._table(data.test.drop(columns=["label"]))
    test_seg = model._segments(model._aligned(test_table))
    test = (test_seg[steps - 1:], model._reconstruct(test_seg))
    T = len(test_table.values)
    win = timestamp_windows(T, sig.windows, sig.gap, steps)
    labels = data.test["label"].to_numpy()
    index = data.test["timestamp"].to_numpy()
    out = {"seed": seed, "train_s": train_s, "val_loss": model.history_[-1]["val_loss"], "settings": {}}
    for name, kw in SETTINGS.items():
        cfg = ScoreConfig(**kw)
        calib = Calibration.fit(*val, cfg, sig.windows)
        res = score_windows(*test, cfg, sig.windows, calib)
        covered = win >= 0
        pred = np.zeros(T, dtype=np.int64)
        pred[covered] = res.is_anomaly[win[covered]]
        prf = M.point_prf(labels, pred)
        truth, ranked = [], []
        for a in data.anomalies.itertuples(index=False):
            rows = np.flatnonzero((index >= a.start) & (index < a.end))
            truth.append(a.root_causes.split(";"))
            ranked.append(M.rank_event_causes([model.sensors_[i] for i in res.root_causes[win[t]]]
                                              for t in rows if pred[t]))
        found, total = M.event_recall(labels, pred)
        out["settings"][name] = {"events_found": found, "events_total": total,
                                 "root_cause_recall_at_3": M.root_cause_recall_at_k(truth, ranked, 3),
                                 "precision": prf.precision, "recall": prf.recall, "f1": prf.f1,
                                 "threshold": calib.threshold}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--length", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    runs = []
    for seed in args.seeds:
        runs.append(run_seed(seed, args.epochs, args.length))
        print(json.dumps(runs[-1]), flush=True)
    meta = {"date": dt.date.today().isoformat(), "mscred": __version__, "torch": torch.__version__,
            "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch thread(s)",
            "epochs": args.epochs, "length": args.length, "command": "benchmarks/demo_scores.py " +
            f"--seeds {' '.join(map(str, args.seeds))} --epochs {args.epochs} --length {args.length}"}
    RESULTS.mkdir(exist_ok=True)
    with atomic_path(RESULTS / "demo_scores.json") as tmp:
        tmp.write_text(json.dumps({"meta": meta, "runs": runs}, indent=2) + "\n")
    lines = [f"Demo pipeline, {args.epochs} epochs, paper synthetic data ({args.length} steps), threshold 1.5 x max "
             f"validation score. `{meta['command']}` ({meta['date']}, {meta['machine']}, torch {meta['torch']}).",
             "", "| setting | seed | found | root causes @3 | precision | recall | F1 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in SETTINGS:
        for run in runs:
            r = run["settings"][name]
            lines.append(f"| {name} | {run['seed']} | {r['events_found']}/{r['events_total']} | "
                         f"{r['root_cause_recall_at_3']:.2f} | {r['precision']:.2f} | {r['recall']:.2f} | "
                         f"{r['f1']:.2f} |")
    with atomic_path(RESULTS / "demo_scores.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
