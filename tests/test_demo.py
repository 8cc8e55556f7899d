"""The demo's whole pipeline (generate -> train -> detect -> evaluate -> report -> table) at a tiny size."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input
from mscred.cli.demo import render, run_demo




def test_demo_pipeline_tiny(tmp_path, capsys):
    out = tmp_path / "demo"
    result = run_demo(out, n_sensors=8, length=3000, seed=1, progress=False, epochs=1,
                      channels=(8, 16, 16, 16), device="cpu")
    assert sorted(p.name for p in out.iterdir()) == ["data", "metrics.json", "model", "report", "scores.csv"]
    assert (out / "report" / "index.html").stat().st_size > 0
    assert json.loads((out / "metrics.json").read_text()) == result
    scores = pd.read_csv(out / "scores.csv", keep_default_na=False)
    test = pd.read_csv(out / "data" / "test.csv")
    assert len(scores) == len(test) == 1500
    assert (scores["timestamp"] == test["timestamp"]).all()
    assert result["events_total"] == 5 and 0 <= result["events_found"] <= 5
    for key in ("precision", "recall", "f1", "root_cause_recall_at_3"):
        assert 0.0 <= result[key] <= 1.0
    assert result["epochs"] == 1 and result["train_s"] > 0 and result["total_s"] >= result["train_s"]
    # The figures are mscred evaluate's: recompute the point figures from the written files by hand.
    pred, labels = scores["is_anomaly"].to_numpy(), test["label"].to_numpy()
    tp = int((pred & labels).sum())
    assert result["precision"] == pytest.approx(tp / pred.sum() if pred.sum() else 0.0)
    assert result["recall"] == pytest.approx(tp / labels.sum())
    render(result)
    shown = capsys.readouterr().out
    assert "anomalies found" in shown and f"{result['events_found']}/5" in shown
    # theta is the count score's: under z_sensor the table once showed "theta -"
    assert result["score"] == "z_sensor" and "theta" not in shown
    render({**result, "score": "count", "theta": [0.005] * 3})
    assert "fixed 0.005, 0.005, 0.005" in capsys.readouterr().out

    from mscred.detector import MSCRED

    model = MSCRED.load(out / "model", device="cpu")
    assert model.config.train.epochs == 1 and model.sensors_ == [c for c in test.columns
                                                                 if c not in ("timestamp", "label")]


def _short_table(folder, rows=40):
    """A `table` dataset (train.csv, test.csv with a label column) too short to train on (110 rows are needed)."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for part in ("train", "test"):
        frame = pd.DataFrame(rng.random((rows, 5)), columns=list("abcde"))
        if part == "test":
            frame["label"] = 0
        frame.to_csv(folder / f"{part}.csv", index=False)
    return folder


def test_demo_too_short_to_train_leaves_no_new_files(tmp_path, capsys):
    """The demo wrote out/data/ (train, test, anomalies) and then failed at training, leaving a data folder that
    read as a run's. Now a failure removes what the run created; what was there before stays."""
    data = _short_table(tmp_path / "short")
    out = tmp_path / "new" / "demo"   # neither folder exists yet
    line = bad_input(capsys, "demo", "--dataset", "table", "--data-root", data, "--out", out, "--quiet",
                     "--no-report", names=("too few to train",))
    assert "110" in line and not (tmp_path / "new").exists()
    # An --out of earlier files: they stay (an earlier scores.csv, the user's note in data/), the new ones go.
    out = tmp_path / "earlier"
    (out / "data").mkdir(parents=True)
    (out / "scores.csv").write_text("timestamp,score,is_anomaly,root_causes\n")
    (out / "data" / "README.txt").write_text("mine\n")
    bad_input(capsys, "demo", "--dataset", "table", "--data-root", data, "--out", out, "--quiet", "--no-report",
              names=("too few to train",))
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["data", "data/README.txt", "scores.csv"]
    assert (out / "scores.csv").read_text() == "timestamp,score,is_anomaly,root_causes\n"
