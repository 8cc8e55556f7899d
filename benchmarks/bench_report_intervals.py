"""The report's shaded intervals drawn one ``axvspan`` each (report.py before commit 2675beb) against one
PolyCollection per axis (report.py now), on 100,000 scored rows with ~1,000 flagged runs: commit 2675beb's
"one collection of shaded intervals (100k rows: 31 -> 10 s)" as a measurement.

Data: ``generate_synthetic`` (30 sensors, 20 events of 3 root causes) with a test part of ``--rows`` rows, written
as test.csv and anomalies.csv, and a SCORES.csv of the same rows whose ``is_anomaly`` holds ``--runs`` random runs of
1-30 rows (overlaps merge) plus part of each event, each flagged row naming 3 sensors.

Timed: ``evaluation.evaluate_files`` with a report folder (``mscred evaluate --report`` as a function: the files
read, the metrics, ``report.build_report``; Agg backend), and inside it ``build_report`` and each figure function
(draw + ``savefig`` into a PNG). "old" runs it with ``report._mark`` replaced by ``_old_mark`` below, the
pre-2675beb ``_mark``/``_shade`` copied from ``git show 2675beb^:src/mscred/report.py``: one ``axvspan`` per
interval, and in the zoom panels every interval of the whole series (the old zoom passed no row range). "new" is
report.py as it is. Everything else is today's code in both. Before timing (and as a warm-up), the score figure of
both is drawn, decoded and compared pixel by pixel. ``--repeats`` times old then new; medians, each run in brackets.

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_report_intervals.py [--rows 100000] [--runs 1000]
        [--repeats 3] [--out benchmarks/results/report_intervals]
"""
from __future__ import annotations

import argparse
import base64
import gc
import io
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import matplotlib

matplotlib.use("Agg")   # before pyplot is imported anywhere: files only, as build_report sets it

import numpy as np
import pandas as pd

from run_header import header, stalled, uptime, write_results

from mscred import report
from mscred.data.synthetic import generate_synthetic
from mscred.evaluation import compute_metrics, evaluate_files, read_ground_truth, read_scores, sensor_pool
from mscred.metrics import events as runs
from mscred.figures import DETECTED, TRUTH

FIGURES = ("score_figure", "series_figure", "zoom_figure", "cause_figure")   # cause_figure: no shading (control)


# ---- report.py before 2675beb (git show 2675beb^:src/mscred/report.py): verbatim but for lo/hi ----
def _old_shade(ax, intervals, x, color, alpha, label=None, ymax=1.0) -> None:
    for i, (a, b) in enumerate(intervals):
        ax.axvspan(x[a], x[min(b, len(x) - 1)], ymax=ymax, color=color, alpha=alpha, lw=0,
                   label=label if i == 0 else None)


def _old_mark(ax, truth, pred, x, lo: int = 0, hi=None) -> None:
    """Detected intervals shaded over the whole height; true events as a red strip along the bottom."""
    # (lo, hi: today's zoom_figure passes the panel's rows; the old one called _mark(ax, truth, pred, x))
    _old_shade(ax, runs(pred), x, DETECTED, 0.35, "detected")
    _old_shade(ax, truth.events, x, TRUTH, 0.9, "true anomaly", ymax=0.06)
# ---- end of the pre-2675beb code ----


def write_inputs(work: Path, rows: int, n_runs: int, seed: int) -> dict[str, Path]:
    """test.csv, anomalies.csv and scores.csv of ``rows`` rows (see the module's docstring)."""
    data = generate_synthetic(n_sensors=30, length=2 * rows, seed=seed, n_anomalies=20)   # test: the second half
    test, anomalies = data.test, data.anomalies
    rng = np.random.default_rng(seed + 1)
    flags = np.zeros(rows, dtype=np.int8)
    for start, length in zip(rng.choice(rows - 30, n_runs, replace=False), rng.integers(1, 31, n_runs)):
        flags[start:start + length] = 1
    sensors = [c for c in test.columns if c not in ("timestamp", "label")]
    picks = np.argsort(rng.random((rows, len(sensors))), axis=1)[:, :3]   # 3 distinct sensors a row
    causes = np.array([";".join(sensors[j] for j in row) for row in picks.tolist()], dtype=object)
    first = int(test["timestamp"].iloc[0])
    for start, end, names in anomalies[["start", "end", "root_causes"]].itertuples(index=False):
        a, b = start - first, end - first
        flags[a + (b - a) // 3:b] = 1   # detected from a third of the way in, its own root causes named
        causes[a:b] = names
    frame = pd.DataFrame({"timestamp": test["timestamp"], "score": rng.random(rows) * 0.5 + flags,
                          "is_anomaly": flags, "root_causes": np.where(flags == 1, causes, "")})
    paths = {name: work / f"{name}.csv" for name in ("test", "anomalies", "scores")}
    test.to_csv(paths["test"], index=False, float_format="%.6f")
    anomalies.to_csv(paths["anomalies"], index=False)
    frame.to_csv(paths["scores"], index=False, float_format="%.6f")
    return paths


def build(out: Path, mark, paths: dict[str, Path]) -> dict[str, float]:
    """Seconds of ``evaluate_files`` with a report (``mscred evaluate --report`` as a function: reading, metrics,
    report), of ``build_report`` inside it and of each figure function, with ``_mark`` = ``mark``; "shaded axes":
    how many times the report called ``_mark``; "CPU wait": the machine's (``run_header.stalled``)."""
    seconds: dict[str, float] = {name: 0.0 for name in (*FIGURES, "build_report")}
    calls = [0]

    def timed(name, fn):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - t0
        return run

    def counted(*args, **kwargs):
        calls[0] += 1
        return mark(*args, **kwargs)

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(report, "_mark", counted))
        for name in (*FIGURES, "build_report"):   # (evaluate_files imports build_report when called)
            stack.enter_context(mock.patch.object(report, name, timed(name, getattr(report, name))))
        gc.collect()   # the previous run's figures (18,000 patches after an "old" one) are not freed in this one
        t0, w = time.perf_counter(), stalled()
        evaluate_files(paths["scores"], paths["test"], anomalies=paths["anomalies"], report_dir=out)
        seconds["evaluate"] = time.perf_counter() - t0
    return {**seconds, "CPU wait": stalled() - w, "shaded axes": calls[0]}   # (an int among the seconds)


def compare_score_figures(scores, truth, result) -> str:
    """Both variants' score figure (as the report draws it, before any timing: also the warm-up) decoded and
    compared: the same picture, or how much differs."""
    import matplotlib.image as mpimg

    threshold, label = report._threshold(scores, scores.is_anomaly, result, None)
    images = {}
    for name, mark in (("old", _old_mark), ("new", report._mark)):
        with mock.patch.object(report, "_mark", mark), matplotlib.rc_context({"text.parse_math": False}):
            png = report.score_figure(scores, truth, scores.is_anomaly, threshold, label)
        images[name] = mpimg.imread(io.BytesIO(base64.b64decode(png)), format="png")
    old, new = images["old"], images["new"]
    if old.shape != new.shape:
        return f"score figure: old {old.shape} and new {new.shape} differ in size"
    differ = np.abs(old - new).max(axis=-1) > 1.5 / 255
    return (f"score figure ({old.shape[1]}x{old.shape[0]} px): {int(differ.sum())} pixels "
            f"({differ.mean():.3%}) differ by more than 1/255 (largest difference {np.abs(old - new).max():.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1_000, help="random flagged runs (before merging)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="folder for results.md and results.json")
    args = parser.parse_args()

    lines = header("The report's shaded intervals: one axvspan each (before 2675beb) against one collection",
                   {"numpy": np.__version__, "pandas": pd.__version__, "matplotlib": matplotlib.__version__,
                    "backend": matplotlib.get_backend()})
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = write_inputs(work, args.rows, args.runs, args.seed)
        scores = read_scores(paths["scores"])
        truth = read_ground_truth(paths["test"], scores, paths["anomalies"])
        result = compute_metrics(scores, truth, sensors=sensor_pool(truth))
        n_runs, n_events = len(runs(scores.is_anomaly)), len(truth.events)
        data = (f"{len(scores.score):,} rows x {len(truth.sensors)} sensors, {n_runs:,} flagged runs "
                f"({int(scores.is_anomaly.sum()):,} rows), {n_events} true events; the report draws the top 4 "
                f"sensors (series) and 4 events x 4 sensors (zoom)")
        check = compare_score_figures(scores, truth, result)
        print(f"{data}\n{check}\n", flush=True)

        measured: dict[str, list[dict]] = {"old": [], "new": []}
        for r in range(args.repeats):
            for name, mark in (("old", _old_mark), ("new", report._mark)):
                measured[name].append(build(work / f"report_{name}_{r}", mark, paths))
                print(f"repeat {r + 1} {name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in measured[name][-1].items()
                                                              if k != "shaded axes"), flush=True)

    shaded = measured["old"][0]["shaded axes"]
    rows = [("score figure", "score_figure"), ("series figure", "series_figure"), ("zoom figure", "zoom_figure"),
            ("cause figure (no shading)", "cause_figure"), ("the report (`build_report`)", "build_report"),
            ("`evaluate_files` with the report (read, metrics, report)", "evaluate")]
    table = ["| timed | old: one axvspan each (s) | new: one collection (s) | old/new |", "| --- | --- | --- | --- |"]
    for label, key in rows:
        med = {n: statistics.median(m[key] for m in measured[n]) for n in measured}
        table.append(f"| {label} | {med['old']:.2f} ({', '.join(f'{m[key]:.2f}' for m in measured['old'])}) | "
                     f"{med['new']:.2f} ({', '.join(f'{m[key]:.2f}' for m in measured['new'])}) | "
                     f"{med['old'] / med['new']:.1f}x |")
    spans = shaded * (n_runs + n_events)
    notes = [f"- data: {data}", f"- validation: {check}",
             f"- shaded axes per report: {shaded} (old: {spans:,} axvspans in all; new: at most 2 collections each)",
             f"- median of {args.repeats} runs, old and new in alternation (each run in brackets); wall seconds",
             f"- CPU wait (/proc/pressure/cpu) over all timed runs: "
             f"{sum(m['CPU wait'] for v in measured.values() for m in v):.2f} s (near 0: no other job took a core)",
             f"- uptime at end: `{uptime()}`"]
    write_results(args.out, lines, notes, table, {"args": {k: str(v) for k, v in vars(args).items()},
                                                  "data": data, "check": check, "runs": measured})


if __name__ == "__main__":
    main()
