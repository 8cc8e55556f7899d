"""The demo's whole pipeline (generate -> train -> detect -> evaluate -> report -> table) at a tiny size."""
from __future__ import annotations

import json

import pandas as pd
import pytest

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
