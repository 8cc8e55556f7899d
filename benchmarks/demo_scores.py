"""Which score setting the demo can stand on: the demo's pipeline on several seeds, scored several ways (CPU).

For each seed, the paper's synthetic data is generated and one MSCRED is trained as ``mscred demo`` trains it
(``--epochs``, 3 by default). The same trained network then scores the test part with each setting below, each
calibrated on the same validation windows (the last quarter of the training windows) with 1.5 x max:

- ``paper``     count of residual entries above theta = 0.005 on w = 10 (the paper's scoring)
- ``count-q``   count above theta = the 0.99 quantile of the validation residuals (``--theta auto``)
- ``mse``       mean residual on w = 10
- ``z_sensor``  per-sensor residual row sums standardised by their validation mean/std, the largest (default)

and variants of z_sensor computed here from the same residual row sums (not library settings), each with its
threshold fitted on the validation windows' scores of the same variant:

- ``z-pot``       z_sensor with a POT threshold (risk 1e-3, level 0.98) instead of 1.5 x max
- ``z-top2``      the sum of the two largest sensor z values, 1.5 x max
- ``z-robust``    standardised by the validation median and 1.4826 x MAD instead of mean/std, 1.5 x max
- ``z-w10+30``    row sums of w = 10 and w = 30 added before standardising, 1.5 x max
- ``z-med3``      z_sensor window scores through a median filter over 3 consecutive windows, 1.5 x max
- ``z-detrend``   each sensor's row sum minus its centred running median over 11 windows (a local baseline that
                  follows slow changes in how well a sensor is reconstructed), divided by the validation standard
                  deviation of that difference; the largest, 1.5 x max

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
from mscred.detect import Calibration, score_windows, sensor_rows, timestamp_windows
from mscred.pot import pot
from mscred.detector import MSCRED

RESULTS = Path(__file__).parent / "results"
SETTINGS = {
    "paper": dict(method="count", theta=0.005),
    "count-q": dict(method="count", theta=None),
    "mse": dict(method="mse"),
    "z_sensor": dict(method="z_sensor"),
}


def _z(rows, ref, robust=False):
    """Standardise (W, n) row sums by the per-sensor statistics of ``ref`` (validation)."""
    if robust:
        med = np.median(ref, axis=0)
        return (rows - med) / np.maximum(1.4826 * np.median(np.abs(ref - med), axis=0), 1e-12)
    return (rows - ref.mean(axis=0)) / np.maximum(ref.std(axis=0), 1e-12)


def _med3(score):
    p = np.pad(score, 1, mode="edge")
    return np.median(np.stack([p[:-2], p[1:-1], p[2:]]), axis=0)


def _running_median(rows, k):
    p = np.pad(rows, ((k // 2, k - 1 - k // 2), (0, 0)), mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(p, k, axis=0), axis=-1)


def _detrend(rows, ref, k=11):
    dv, dt = ref - _running_median(ref, k), rows - _running_median(rows, k)
    sd = np.maximum(dv.std(axis=0), 1e-12)
    return dt / sd, dv / sd


def _variant(name, val_rows, test_rows):
    """(test window scores (W,), root-cause ranking values (W, n), threshold) of variant ``name``; rows are the
    (W, n_scales, n) residual row sums of :func:`mscred.detect.sensor_rows`."""
    v, t = val_rows[:, 0], test_rows[:, 0]  # w = 10
    if name == "z-w10+30":
        v, t = val_rows[:, :2].sum(axis=1), test_rows[:, :2].sum(axis=1)
    if name == "z-detrend":
        zt, zv = _detrend(t, v)
    else:
        zt, zv = _z(t, v, robust=name == "z-robust"), _z(v, v, robust=name == "z-robust")
    if name == "z-top2":
        st, sv = np.sort(zt, axis=1)[:, -2:].sum(axis=1), np.sort(zv, axis=1)[:, -2:].sum(axis=1)
    else:
        st, sv = zt.max(axis=1), zv.max(axis=1)
    if name == "z-med3":
        st, sv = _med3(st), _med3(sv)
    threshold = pot(sv, risk=1e-3, level=0.98) if name == "z-pot" else 1.5 * sv.max()
    return st, zt, threshold


VARIANTS = ("z-pot", "z-top2", "z-robust", "z-w10+30", "z-med3", "z-detrend")


def run_seed(seed: int, epochs: int, length: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    data = generate_synthetic(length=length, seed=seed)
    t0 = time.perf_counter()
    model = MSCRED(epochs=epochs, seed=seed, device="cpu", progress=False).fit(data.train)
    train_s = time.perf_counter() - t0
    sig, steps = model.config_.signature, model.config_.signature.steps
    # The validation windows exactly as fit split them.
    train_seg = model._segments(model._aligned(model._table(data.train)))
    n_windows = len(train_seg) - steps + 1
    n_val = min(max(int(round(n_windows * model.config_.train.val_fraction)), 1), n_windows - 1)
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
    val_rows, test_rows = sensor_rows(*val), sensor_rows(*test)
    for name in list(SETTINGS) + list(VARIANTS):
        if name in SETTINGS:
            cfg = ScoreConfig(**SETTINGS[name])
            calib = Calibration.fit(*val, cfg, sig.windows)
            res = score_windows(*test, cfg, sig.windows, calib)
            flags, causes, threshold = res.is_anomaly, res.root_causes, calib.threshold
        else:
            score, rank_by, threshold = _variant(name, val_rows, test_rows)
            flags, causes = score > threshold, np.argsort(-rank_by, axis=1, kind="stable")[:, :3]
        covered = win >= 0
        pred = np.zeros(T, dtype=np.int64)
        pred[covered] = flags[win[covered]]
        prf = M.point_prf(labels, pred)
        truth, ranked = [], []
        for a in data.anomalies.itertuples(index=False):
            rows = np.flatnonzero((index >= a.start) & (index < a.end))
            truth.append(a.root_causes.split(";"))
            ranked.append(M.rank_event_causes([model.sensors_[i] for i in causes[win[t]]]
                                              for t in rows if pred[t]))
        found, total = M.event_recall(labels, pred)
        out["settings"][name] = {"events_found": found, "events_total": total,
                                 "root_cause_recall_at_3": M.root_cause_recall_at_k(truth, ranked, 3),
                                 "precision": prf.precision, "recall": prf.recall, "f1": prf.f1,
                                 "threshold": float(threshold)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--length", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at once, in separate processes "
                        "(each with --threads threads); the figures do not depend on it")
    parser.add_argument("--name", default="demo_scores",
                        help="stem of the result files in benchmarks/results/ (e.g. demo_scores_10epochs)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    work = [(seed, args.epochs, args.length, args.threads) for seed in args.seeds]
    if args.jobs > 1:
        import multiprocessing as mp
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            runs = pool.starmap(run_seed, work)
    else:
        runs = [run_seed(*w) for w in work]
    for run in runs:
        print(json.dumps(run), flush=True)
    meta = {"date": dt.date.today().isoformat(), "mscred": __version__, "torch": torch.__version__,
            "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch thread(s)",
            "epochs": args.epochs, "length": args.length, "command": "benchmarks/demo_scores.py " +
            f"--seeds {' '.join(map(str, args.seeds))} --epochs {args.epochs} --length {args.length} --name {args.name}"}
    RESULTS.mkdir(exist_ok=True)
    with atomic_path(RESULTS / f"{args.name}.json") as tmp:
        tmp.write_text(json.dumps({"meta": meta, "runs": runs}, indent=2) + "\n")
    lines = [f"Demo pipeline, {args.epochs} epochs, paper synthetic data ({args.length} steps), threshold 1.5 x max "
             f"validation score (z-pot: POT); settings in the script's docstring. "
             f"`{meta['command']}` ({meta['date']}, {meta['machine']}, torch {meta['torch']}).",
             "", "| setting | seed | found | root causes @3 | precision | recall | F1 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in list(SETTINGS) + list(VARIANTS):
        for run in runs:
            r = run["settings"][name]
            lines.append(f"| {name} | {run['seed']} | {r['events_found']}/{r['events_total']} | "
                         f"{r['root_cause_recall_at_3']:.2f} | {r['precision']:.2f} | {r['recall']:.2f} | "
                         f"{r['f1']:.2f} |")
    with atomic_path(RESULTS / f"{args.name}.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
