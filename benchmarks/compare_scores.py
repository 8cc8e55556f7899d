"""Which window score holds up, and the paper's synthetic experiment (issue 4, items 5 and 6). CPU only.

For each dataset, one MSCRED is trained (our default settings, ``--epochs``), then the residuals
R = (M - recon)^2 of the validation windows (the last part of the training data, as ``fit`` splits it) and of the
test windows are scored several ways, all on the score scales of the config (w = 10 by default):

- ``count@0.005``   the paper: entries of R above theta = 0.005
- ``count@q``       entries above a per-scale theta = the ``theta_quantile`` quantile of the validation residuals
- ``mse``           the mean of R
- ``z_entry``       R standardised per entry (i, j) by the validation mean and standard deviation, then averaged
- ``z_sensor``      per-sensor row sums of R standardised by their validation statistics; the largest of them

Each per-window score is mapped to rows as ``mscred detect`` does and compared by AUC-ROC, AUC-PR, VUS-ROC and
VUS-PR with a seeded uniform random score. On the paper's synthetic data the script also reports the paper's
experiment: point P/R/F1, events found, root-cause recall@3 and duration accuracy, for the paper's scoring settings
(count above 0.005, 1.5 x max validation score), for the default ScoreConfig of this version and for the other
selectable settings, all on the same trained network (only the calibration differs).

    .venv/bin/python benchmarks/compare_scores.py --datasets synthetic --epochs 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mscred import metrics as M
from mscred.atomic import atomic_path
from mscred.config import ScoreConfig
from mscred.detect import Calibration, choose_theta, residuals, scale_index, score_windows, timestamp_windows
from mscred.detector import MSCRED
from mscred.vus import vus

RESULTS = Path(__file__).parent / "results"
EPS = 1e-12


# ----------------------------------------------------------------------------------------------- data
def load(name: str, args):
    """(train DataFrame, test DataFrame with 'label', anomalies DataFrame or None)."""
    if name == "synthetic":
        from mscred.data.synthetic import generate_synthetic

        data = generate_synthetic(n_sensors=args.sensors, length=args.length, seed=args.seed)
        return data.train, data.test, data.anomalies
    from mscred.data.datasets import load_dataset  # H1's loaders (SMD, SMAP/MSL, generic, a registry dataset)

    data = load_dataset(name)
    return data.train, data.test, getattr(data, "anomalies", None)


def residual_sets(model: MSCRED, train: pd.DataFrame, test: pd.DataFrame):
    """Validation and test (target, recon) float32 (W, n_scales, n, n), split as MSCRED.fit splits."""
    steps = model.config_.signature.steps
    seg = model._segments(model._aligned(model._table(train.drop(columns=["label"], errors="ignore"))))
    n_windows = len(seg) - steps + 1
    n_val = min(max(int(round(n_windows * model.config_.train.val_fraction)), 1), n_windows - 1)
    val_seg = seg[n_windows - n_val:]
    test_table = model._table(test.drop(columns=["label"]))
    test_seg = model._segments(model._aligned(test_table))
    return ((val_seg[steps - 1:], model._reconstruct(val_seg)),
            (test_seg[steps - 1:], model._reconstruct(test_seg)), len(test_table.values))


# ----------------------------------------------------------------------------------------------- scores
def score_variants(val, test, idx: list[int], theta_quantile: float) -> dict[str, np.ndarray]:
    """Per-window test scores of every variant, shape (W_test,) each."""
    r_val = residuals(*val)[:, idx].astype(np.float64)     # (Wv, s, n, n)
    r_test = residuals(*test)[:, idx].astype(np.float64)   # (Wt, s, n, n)
    theta_q = choose_theta(val[0][:, idx], val[1][:, idx], theta_quantile)[None, :, None, None]
    mu, sd = r_val.mean(axis=0), r_val.std(axis=0) + EPS
    rows_val, rows_test = r_val.sum(axis=(1, 3)), r_test.sum(axis=(1, 3))  # (W, n) per-sensor row sums
    mu_s, sd_s = rows_val.mean(axis=0), rows_val.std(axis=0) + EPS
    return {
        "count@0.005": (r_test > 0.005).sum(axis=(1, 2, 3)).astype(np.float64),
        f"count@q{theta_quantile:g}": (r_test > theta_q).sum(axis=(1, 2, 3)).astype(np.float64),
        "mse": r_test.mean(axis=(1, 2, 3)),
        "z_entry": ((r_test - mu) / sd).mean(axis=(1, 2, 3)),
        "z_sensor": ((rows_test - mu_s) / sd_s).max(axis=1),
    }


def per_row(window_values: np.ndarray, win: np.ndarray, fill=0.0) -> np.ndarray:
    out = np.full(len(win), fill, dtype=np.asarray(window_values).dtype)
    out[win >= 0] = window_values[win[win >= 0]]
    return out


def threshold_free(labels: np.ndarray, score: np.ndarray, window: int) -> dict:
    v_roc, v_pr = vus(labels, score, sliding_window=window)
    return {"auc_roc": M.auc_roc(labels, score), "auc_pr": M.auc_pr(labels, score), "vus_roc": v_roc,
            "vus_pr": v_pr}


# ----------------------------------------------------------------------------------------------- paper's table
def paper_experiment(model, val, test, labels, win, anomalies, test_index, cfg: ScoreConfig) -> dict:
    """P/R/F1, events found, root-cause recall@3 and duration accuracy of one ScoreConfig."""
    windows = model.config_.signature.windows
    calib = Calibration.fit(val[0], val[1], cfg, windows)
    result = score_windows(test[0], test[1], cfg, windows, calib)
    pred = per_row(result.is_anomaly.astype(np.int8), win, 0)
    causes_w = [[model.sensors_[i] for i in row] for row in result.root_causes]
    n_lit_w = result.scales_lit.sum(axis=1)
    point = M.point_prf(labels, pred)
    position = np.asarray(test_index, dtype=np.float64)
    truth, ranked, duration_hits, detected = [], [], 0, 0
    durations = sorted(set(int(d) for d in anomalies["end"] - anomalies["start"]))
    for _, a in anomalies.iterrows():
        lo, hi = np.searchsorted(position, a["start"]), np.searchsorted(position, a["end"])
        rows = [t for t in range(lo, hi) if pred[t] and win[t] >= 0]
        truth.append(set(str(a["root_causes"]).split(";")))
        ranked.append(M.rank_event_causes(causes_w[win[t]] for t in rows))
        if rows:
            detected += 1
            # durations by scale: 1 scale lit = the shortest class, 2 = the middle one, all 3 = the longest
            lit = int(np.bincount([n_lit_w[win[t]] for t in rows]).argmax())
            true_class = durations.index(int(a["end"] - a["start"])) + 1
            duration_hits += int(lit == true_class)
    return {"theta": calib.theta, "threshold": calib.threshold, "precision": point.precision,
            "recall": point.recall, "f1": point.f1, "events_found": detected, "events_total": len(anomalies),
            "root_cause_recall_at_3": M.root_cause_recall_at_k(truth, ranked, 3),
            "duration_accuracy_detected": duration_hits / detected if detected else None,
            "pa_f1": M.pa_f1(labels, pred).f1}


# ----------------------------------------------------------------------------------------------- main
def run_dataset(name: str, args) -> dict:
    t0 = time.time()
    train, test, anomalies = load(name, args)
    if args.model:  # a model trained beforehand on this dataset's training part (e.g. by `mscred train`)
        model = MSCRED.load(args.model, device="cpu")
        if model.sensors_ != [c for c in train.columns if c not in ("timestamp", "label")]:
            raise ValueError(f"{args.model}: trained on other sensors than {name}'s")
    else:
        extra = {"channels": tuple(int(c) for c in args.channels.split(","))} if args.channels else {}
        model = MSCRED(epochs=args.epochs, device="cpu", progress=False, seed=args.seed, **extra)
        model.fit(train)
    fit_s = time.time() - t0
    val, tst, length = residual_sets(model, train, test)
    sig, cfg = model.config_.signature, model.config_.score
    win = timestamp_windows(length, sig.windows, sig.gap, sig.steps)
    labels = test["label"].to_numpy().astype(np.int8)
    idx = scale_index(sig.windows, cfg.scales)
    epochs = len(model.history_) if getattr(model, "history_", None) else args.epochs
    out = {"dataset": name, "train_rows": len(train), "test_rows": len(test), "sensors": len(model.sensors_),
           "anomalous_rows": int(labels.sum()), "epochs": epochs, "model": args.model,
           "fit_seconds": None if args.model else round(fit_s, 1),
           "final_val_loss": model.history_[-1].get("val_loss") if model.history_ else None, "scores": {}}
    for variant, window_score in score_variants(val, tst, idx, cfg.theta_quantile).items():
        out["scores"][variant] = threshold_free(labels, per_row(window_score, win), args.vus_window)
    rng = np.random.default_rng(args.seed)
    out["scores"]["random"] = threshold_free(labels, rng.random(len(labels)), args.vus_window)
    if anomalies is not None and "root_causes" in anomalies.columns:
        index = test["timestamp"].to_numpy() if "timestamp" in test.columns else np.arange(len(test))
        defaults = ScoreConfig()
        settings = {
            "paper settings (count > 0.005, 1.5 x max)": ScoreConfig(method="count", theta=0.005, scales=(10,),
                                                                     threshold="beta_max", beta=1.5),
            # the defaults of this mscred version (not the ones stored with a model loaded by --model)
            f"our defaults ({defaults.method}, {defaults.threshold})": defaults,
        }
        # the alternatives a user can select (train --score / --theta auto / --threshold pot)
        for label, alt in [("count, theta = val q0.99, 1.5 x max", dict(method="count", theta=None)),
                           ("mse, 1.5 x max", dict(method="mse")),
                           ("count > 0.005, POT", dict(method="count", threshold="pot")),
                           ("mse, POT", dict(method="mse", threshold="pot")),
                           ("z_sensor, POT", dict(method="z_sensor", threshold="pot"))]:
            settings[label] = ScoreConfig(**{**defaults.__dict__, **alt})
        out["paper_experiment"] = {label: paper_experiment(model, val, tst, labels, win, anomalies, index, c)
                                   for label, c in settings.items()}
        out["default_score_config"] = dict(defaults.__dict__)
        if args.example_dir:
            best = max(settings, key=lambda label: out["paper_experiment"][label]["f1"])
            out["example"] = write_example(model, val, test, anomalies, settings[best], best,
                                           Path(args.example_dir))
    return out


def write_example(model, val, test, anomalies, cfg: ScoreConfig, label: str, out_dir: Path) -> dict:
    """Recalibrate the trained network with ``cfg`` (scoring only, no retraining), then detect -> report."""
    from mscred.evaluation import evaluate_files

    model.config_.score = cfg
    model.calibration_ = Calibration.fit(val[0], val[1], cfg, model.config_.signature.windows)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save(out_dir / "model")
    test.to_csv(out_dir / "test.csv", index=False)
    anomalies.to_csv(out_dir / "anomalies.csv", index=False)
    model.detect(test.drop(columns=["label"])).to_csv(out_dir / "scores.csv", index=False)
    result = evaluate_files(out_dir / "scores.csv", out_dir / "test.csv", report_dir=out_dir / "report",
                            model_dir=out_dir / "model")
    return {"setting": label, "dir": str(out_dir), "f1": result["f1"]}


def markdown(report: dict) -> str:
    lines = [f"# Window scores compared ({report['date']})", "",
             f"Machine: {report['machine']}; torch {report['torch']}; command: `{report['command']}`.",
             f"VUS sliding window {report['vus_window']} (buffers 0..{2 * report['vus_window']}); random = seeded "
             "uniform scores.", ""]
    if report.get("model_note"):
        lines[-1:-1] = [f"Model: {report['model_note']}"]
    for d in report["datasets"]:
        if "error" in d:
            lines += [f"## {d['dataset']}: not run", "", f"{d['error']}", ""]
            continue
        lines += [f"## {d['dataset']}", "",
                  f"{d['train_rows']} train / {d['test_rows']} test rows, {d['sensors']} sensors, "
                  f"{d['anomalous_rows']} anomalous test rows; {d['epochs']} epochs on CPU"
                  + (f" in {d['fit_seconds']} s" if d['fit_seconds'] is not None else f" (model {d['model']})")
                  + f", final validation loss {d['final_val_loss']}.", "",
                  "| score | AUC-ROC | AUC-PR | VUS-ROC | VUS-PR |", "| --- | ---: | ---: | ---: | ---: |"]
        for name, m in d["scores"].items():
            lines.append(f"| {name} | {m['auc_roc']:.3f} | {m['auc_pr']:.3f} | {m['vus_roc']:.3f} | "
                         f"{m['vus_pr']:.3f} |")
        if "paper_experiment" in d:
            lines += ["", "| settings | P | R | F1 | events | root-cause recall@3 | duration acc. (detected) | "
                          "PA-F1 (inflated) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for name, m in d["paper_experiment"].items():
                dur = "-" if m["duration_accuracy_detected"] is None else f"{m['duration_accuracy_detected']:.2f}"
                lines.append(f"| {name} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | "
                             f"{m['events_found']}/{m['events_total']} | {m['root_cause_recall_at_3']:.3f} | "
                             f"{dur} | {m['pa_f1']:.3f} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="synthetic", help="comma-separated: synthetic and load_dataset names")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vus-window", type=int, default=100)
    parser.add_argument("--sensors", type=int, default=30, help="synthetic data: sensors (paper: 30)")
    parser.add_argument("--length", type=int, default=20_000, help="synthetic data: steps (paper: 20,000)")
    parser.add_argument("--example-dir", default=None,
                        help="synthetic: recalibrate with the best-F1 setting and write model, scores, report here")
    parser.add_argument("--model", default=None, help="use this trained model directory (one dataset only)")
    parser.add_argument("--model-note", default="", help="how the --model was made, for the markdown")
    parser.add_argument("--channels", default=None, help="smoke tests only: encoder channels, e.g. 4,8,8,8")
    parser.add_argument("--out", default=str(RESULTS / "scores"), help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)  # the 2 shared cores of the team machine
    report = {"date": dt.datetime.now().isoformat(timespec="seconds"), "command": " ".join(sys.argv),
              "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, CPU",
              "torch": torch.__version__, "vus_window": args.vus_window, "model_note": args.model_note,
              "datasets": []}
    for name in [n.strip() for n in args.datasets.split(",") if n.strip()]:
        try:
            report["datasets"].append(run_dataset(name, args))
        except (ImportError, FileNotFoundError, OSError, ValueError) as exc:  # a loader or its files missing
            report["datasets"].append({"dataset": name, "error": f"{type(exc).__name__}: {exc}"})
        print(json.dumps(report["datasets"][-1], default=str)[:2000], flush=True)
    out = Path(args.out)
    with atomic_path(out.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(report, indent=2, default=str) + "\n")
    with atomic_path(out.with_suffix(".md")) as tmp:
        tmp.write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
