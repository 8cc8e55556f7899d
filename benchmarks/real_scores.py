"""Which window score holds up on labelled data from a package registry (issue 4, item 6). CPU only.

For each seed, one MSCRED is trained on the dataset's training part (our default settings, ``--epochs``), then the
residuals R = (M - recon)^2 of the validation windows (the last ``val_fraction`` of the training windows, exactly as
``MSCRED.fit`` splits them) and of every test run are scored five ways, all on the score scales of the config
(w = 10 by default):

- ``paper``     the count of entries of R above theta = 0.005 (the paper's score; ``ScoreConfig(method="count")``)
- ``count-q``   the count above a per-scale theta = the 0.99 quantile of the validation residuals (``--theta auto``)
- ``mse``       the mean of R (``ScoreConfig(method="mse")``)
- ``z_entry``   R standardised per entry (scale, i, j) by its validation mean and standard deviation, then
                averaged over the entries (computed here; the same definition as ``compare_scores.py``)
- ``z_sensor``  per-sensor residual row sums standardised by their validation statistics, the largest (the
                library's default score, ``ScoreConfig(method="z_sensor")``)

and a seeded uniform random score. The four library scores come from :func:`mscred.detect.score_windows` with a
calibration fitted on the validation windows, so they are what ``mscred detect`` outputs. Window scores are mapped
to rows as ``mscred detect`` maps them; rows that no window covers yet (the first ~100 of a run) are left out of
every metric, the random baseline's included, so that no score gains from the zeros there.

Threshold-free figures per test run: AUC-ROC, AUC-PR (average precision), VUS-ROC and VUS-PR (``mscred.vus``,
sliding window ``--vus-window``). Thresholded, with each score's threshold fitted on its own validation scores by
the default rule (1.5 x max): the detection rate (share of faulty rows flagged), the false-alarm rate (share of
normal scored rows flagged) and the detection delay (rows from the fault's start to the first flagged faulty row),
the figures the process-monitoring literature reports for this benchmark. The datasets:

- ``tep``: the Tennessee Eastman process (SIMULATED plant; the Braatz data shipped in the ``bibmon`` wheel, see
  :mod:`mscred.data.datasets`). One network per seed is trained on the fault-free runs; each of the 21 fault
  runs (``--faults``) is one test set, normal for its first 160 samples and faulty after.

Writes ``results/real_scores.{json,md}`` (``--out``).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/real_scores.py --seeds 0 1 2 --epochs 3 --threads 1
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mscred import __version__
from mscred import metrics as M
from mscred.atomic import atomic_path
from mscred.config import ScoreConfig
from mscred.data.datasets import TEP_FAULTS, load_dataset
from mscred.detect import Calibration, residuals, scale_index, score_windows, timestamp_windows
from mscred.thresholds import choose_threshold
from mscred.detector import MSCRED
from mscred.vus import vus

sys.path.insert(0, str(Path(__file__).parent))  # demo_scores.py sits beside this script
from demo_scores import SETTINGS  # noqa: E402

RESULTS = Path(__file__).parent / "results"
# The library's scores by the names of the demo comparison (defined once, in benchmarks/demo_scores.py).
LIBRARY_SCORES = SETTINGS
ORDER = ["paper", "count-q", "mse", "z_entry", "z_sensor", "random"]
EPS = 1e-12


def windows_of(model: MSCRED, frame) -> tuple[np.ndarray, np.ndarray, int]:
    """(target, recon) float32 (W, n_scales, n, n) of every window of ``frame``, and its number of rows."""
    steps = model.config_.signature.steps
    table = model._table(frame.drop(columns=["label"], errors="ignore"))
    seg = model._segments(model._aligned(table))
    return seg[steps - 1:], model._reconstruct(seg), len(table.values)


def validation_windows(model: MSCRED, train) -> tuple[np.ndarray, np.ndarray]:
    """The validation windows of ``fit``: the last ``val_fraction`` of the training windows."""
    target, recon, _ = windows_of(model, train)
    n_windows = len(target)
    n_val = min(max(int(round(n_windows * model.config_.train.val_fraction)), 1), n_windows - 1)
    return target[n_windows - n_val:], recon[n_windows - n_val:]


def z_entry_fit(val, idx):
    """Validation mean and std of every residual entry (n_score_scales, n, n), and the validation z_entry scores."""
    r = residuals(val[0], val[1])[:, idx].astype(np.float64)
    mu, sd = r.mean(axis=0), r.std(axis=0) + EPS
    return mu, sd, ((r - mu) / sd).mean(axis=(1, 2, 3))


def window_scores(model: MSCRED, calibs: dict, z_stats, test) -> dict[str, np.ndarray]:
    """Per-window test scores (W,) of every score."""
    windows = model.config_.signature.windows
    out = {}
    for name, cfg in calibs.items():
        out[name] = score_windows(test[0], test[1], cfg[0], windows, cfg[1]).score
    idx = scale_index(windows, model.config_.score.scales)
    mu, sd, _ = z_stats
    out["z_entry"] = ((residuals(test[0], test[1])[:, idx].astype(np.float64) - mu) / sd).mean(axis=(1, 2, 3))
    return out


def figures(labels: np.ndarray, score: np.ndarray, window: int) -> dict:
    v_roc, v_pr = vus(labels, score, sliding_window=window)
    return {"auc_roc": M.auc_roc(labels, score), "auc_pr": M.auc_pr(labels, score), "vus_roc": v_roc,
            "vus_pr": v_pr}


def thresholded(labels: np.ndarray, flagged: np.ndarray, first_faulty: int) -> dict:
    """Detection rate, false-alarm rate and detection delay (rows) of 0/1 flags on the scored rows."""
    faulty, normal = labels == 1, labels == 0
    hits = np.flatnonzero(flagged & faulty)
    return {"detection_rate": float(flagged[faulty].mean()) if faulty.any() else None,
            "false_alarm_rate": float(flagged[normal].mean()) if normal.any() else None,
            "delay_rows": int(hits[0] - first_faulty) if len(hits) else None}


def run_seed(seed: int, args) -> dict:
    base = load_dataset(f"{args.dataset}:{args.faults[0]}")
    t0 = time.time()
    extra = {"channels": tuple(int(c) for c in args.channels.split(","))} if args.channels else {}
    model = MSCRED(epochs=args.epochs, device="cpu", progress=False, seed=seed, **extra)
    model.fit(base.train)
    fit_s = time.time() - t0
    sig = model.config_.signature
    val = validation_windows(model, base.train)
    calibs = {}
    for name, fields in LIBRARY_SCORES.items():
        cfg = ScoreConfig(**{**model.config_.score.__dict__, **fields})
        calibs[name] = (cfg, Calibration.fit(val[0], val[1], cfg, sig.windows))
    z_stats = z_entry_fit(val, scale_index(sig.windows, model.config_.score.scales))
    cfg0 = model.config_.score
    thresholds = {name: c[1].threshold for name, c in calibs.items()}
    thresholds["z_entry"] = float(choose_threshold(cfg0.threshold, z_stats[2], cfg0))
    runs = {}
    rng = np.random.default_rng(seed)
    for fault in args.faults:
        data = base if fault == args.faults[0] else load_dataset(f"{args.dataset}:{fault}")
        test = windows_of(model, data.test)
        win = timestamp_windows(test[2], sig.windows, sig.gap, sig.steps)
        covered = win >= 0
        labels = data.test["label"].to_numpy().astype(np.int8)[covered]
        scores = {name: w[win[covered]] for name, w in window_scores(model, calibs, z_stats, test).items()}
        scores["random"] = rng.random(int(covered.sum()))
        first_faulty = int(np.flatnonzero(labels)[0]) if labels.any() else 0
        runs[data.name] = {"rows_scored": int(covered.sum()), "anomalous_rows": int(labels.sum()),
                           "scores": {name: figures(labels, scores[name], args.vus_window) for name in ORDER}}
        for name, threshold in thresholds.items():
            runs[data.name]["scores"][name].update(thresholded(labels, scores[name] > threshold, first_faulty))
        print(f"seed {seed} {data.name}: " + ", ".join(f"{n} {runs[data.name]['scores'][n]['auc_pr']:.3f}"
                                                       for n in ORDER), flush=True)
    return {"seed": seed, "fit_seconds": round(fit_s, 1), "epochs": len(model.history_),
            "final_val_loss": model.history_[-1].get("val_loss") if model.history_ else None,
            "train_rows": len(base.train), "sensors": len(model.sensors_), "runs": runs,
            "thresholds": thresholds, "threshold_rule": f"{cfg0.threshold} (beta {cfg0.beta})"}


def summary(seeds: list[dict]) -> dict:
    """Per score: mean AUC-PR / VUS-PR over all (seed, run) pairs, and on how many runs it is the best model score
    (ties counted for each; random excluded)."""
    out = {}
    models = [n for n in ORDER if n != "random"]
    for metric in ("auc_pr", "vus_pr", "auc_roc", "vus_roc"):
        table = {n: [] for n in ORDER}
        wins = {n: 0 for n in models}
        for s in seeds:
            for run in s["runs"].values():
                for n in ORDER:
                    table[n].append(run["scores"][n][metric])
                best = max(run["scores"][n][metric] for n in models)
                for n in models:
                    wins[n] += int(run["scores"][n][metric] >= best - 1e-12)
        out[metric] = {n: {"mean": float(np.mean(v)), "median": float(np.median(v)),
                           "above_random": int(sum(a > r for a, r in zip(v, table["random"]))) if n != "random"
                           else None, "best": wins.get(n)} for n, v in table.items()}
    for metric in ("detection_rate", "false_alarm_rate", "delay_rows"):
        out[metric] = {}
        for n in models:
            v = [run["scores"][n][metric] for s in seeds for run in s["runs"].values()]
            found = [x for x in v if x is not None]
            out[metric][n] = {"mean": float(np.mean(found)) if found else None, "missing": len(v) - len(found)}
    out["runs"] = sum(len(s["runs"]) for s in seeds)
    return out


def markdown(report: dict) -> str:
    s = report["summary"]
    lines = [f"# Window scores on registry data ({report['date']})", "",
             f"Command: `{report['command']}`", "",
             f"Machine: {report['machine']}; torch {report['torch']}; mscred {report['mscred']} (commit "
             f"{report['commit']}).", "",
             f"Dataset: {report['dataset_note']}", "",
             f"{s['runs']} test runs in all (seeds x faults); rows no window covers are left out of every metric. "
             f"VUS sliding window {report['vus_window']}. 'best' = runs on which the score has the highest value "
             "among the model scores (ties count for each); 'above random' = runs on which it beats the seeded "
             "random score.", "",
             "| score | mean AUC-PR | mean VUS-PR | best (AUC-PR) | best (VUS-PR) | above random (AUC-PR) | "
             "mean AUC-ROC | mean VUS-ROC |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in ORDER:
        pr, vpr = s["auc_pr"][n], s["vus_pr"][n]
        best = "-" if n == "random" else f"{pr['best']}/{s['runs']}"
        vbest = "-" if n == "random" else f"{vpr['best']}/{s['runs']}"
        above = "-" if n == "random" else f"{pr['above_random']}/{s['runs']}"
        lines.append(f"| {n} | {pr['mean']:.3f} | {vpr['mean']:.3f} | {best} | {vbest} | {above} | "
                     f"{s['auc_roc'][n]['mean']:.3f} | {s['vus_roc'][n]['mean']:.3f} |")
    lines += ["", f"Thresholded ({report['seeds'][0]['threshold_rule']} of each score's own validation scores), "
              "means over the runs; the delay is in rows from the fault's start (3 minutes each for TEP), over the "
              "runs where a faulty row was flagged:", "",
              "| score | detection rate | false-alarm rate | delay (rows) | runs with no faulty row flagged |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for n in ORDER[:-1]:
        dr, far, delay = s["detection_rate"][n], s["false_alarm_rate"][n], s["delay_rows"][n]
        cell = "-" if delay["mean"] is None else f"{delay['mean']:.1f}"
        lines.append(f"| {n} | {dr['mean']:.3f} | {far['mean']:.3f} | {cell} | {delay['missing']} |")
    for seed in report["seeds"]:
        lines += ["", f"## seed {seed['seed']}", "",
                  f"{seed['train_rows']} training rows, {seed['sensors']} sensors, {seed['epochs']} epochs in "
                  f"{seed['fit_seconds']} s, final validation loss {seed['final_val_loss']:.5g}. AUC-PR / VUS-PR "
                  "per test run:", "",
                  "| run | anomalous / scored rows | " + " | ".join(ORDER) + " |",
                  "| --- | ---: | " + " | ".join("---:" for _ in ORDER) + " |"]
        for name, run in seed["runs"].items():
            cells = " | ".join(f"{run['scores'][n]['auc_pr']:.3f} / {run['scores'][n]['vus_pr']:.3f}" for n in ORDER)
            lines.append(f"| {name} | {run['anomalous_rows']} / {run['rows_scored']} | {cells} |")
    return "\n".join(lines) + "\n"


def write(report: dict, out: Path) -> None:
    report["summary"] = summary(report["seeds"])
    with atomic_path(out.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(report, indent=2) + "\n")
    with atomic_path(out.with_suffix(".md")) as tmp:
        tmp.write_text(markdown(report))
    print(markdown(report))


def merge(paths: list[str], out: Path) -> int:
    """One report from several runs of this script (same dataset and settings, different seeds)."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    report = dict(parts[0])
    report["command"] = " ; ".join(p["command"] for p in parts) + f" ; merged by: {' '.join(sys.argv)}"
    report["wall_seconds"] = [p["wall_seconds"] for p in parts]
    report["seeds"] = sorted((s for p in parts for s in p["seeds"]), key=lambda s: s["seed"])
    write(report, out)
    return 0


def parse_faults(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="tep", choices=["tep"])
    parser.add_argument("--faults", default=f"{TEP_FAULTS[0]}-{TEP_FAULTS[-1]}", type=parse_faults,
                        help="test runs, e.g. 1-21 or 1,2,6")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vus-window", type=int, default=100)
    parser.add_argument("--channels", default=None, help="smoke tests only: encoder channels, e.g. 4,8,8,8")
    parser.add_argument("--out", default=str(RESULTS / "real_scores"), help="writes OUT.json and OUT.md")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="combine the seeds of earlier runs' JSON files (e.g. seeds run in parallel) into OUT")
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, Path(args.out))
    import torch

    torch.set_num_threads(args.threads)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip() or "?"
    except OSError:
        commit = "?"
    start = time.time()
    seeds = [run_seed(seed, args) for seed in args.seeds]
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), {args.threads} torch "
                         f"thread(s), no GPU",
              "torch": torch.__version__, "mscred": __version__, "commit": commit, "vus_window": args.vus_window,
              "dataset_note": load_dataset(f"{args.dataset}:{args.faults[0]}").description,
              "wall_seconds": round(time.time() - start, 1), "seeds": seeds}
    write(report, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
