"""The demo's whole pipeline (generate -> train -> detect -> evaluate -> table) at a tiny size, and its evaluation."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mscred.cli.demo import evaluate, render, run_demo


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (see test_detector.py); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_evaluate_by_hand():
    # 12 rows; truth: events [2, 5) with causes a;b and [8, 10) with causes c;d.
    labels = np.array([0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0])
    pred = np.array([0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1])
    causes = ["", "", "", "a;x;y", "a;b;y", "b;a;z", "", "", "", "", "", "q;r;s"]
    frame = pd.DataFrame({"timestamp": np.arange(100, 112), "score": 0.0, "is_anomaly": pred,
                          "root_causes": causes})
    anomalies = pd.DataFrame({"start": [102, 108], "end": [105, 110], "root_causes": ["a;b", "c;d"]})
    out = evaluate(frame, labels, anomalies)
    # TP = rows 3, 4; predicted 4, true 5.
    assert out["precision"] == pytest.approx(2 / 4) and out["recall"] == pytest.approx(2 / 5)
    assert out["f1"] == pytest.approx(2 * 0.5 * 0.4 / 0.9)
    assert (out["events_found"], out["events_total"]) == (1, 2)
    # Event 1: rows 3, 4 vote a (2), then x/b/y: a and b in the top 3 -> 1.0; event 2 missed -> 0.
    assert out["root_cause_recall_at_3"] == pytest.approx(0.5)


def test_demo_pipeline_tiny(tmp_path, capsys):
    out = tmp_path / "demo"
    result = run_demo(out, n_sensors=8, length=3000, seed=1, progress=False, epochs=1,
                      channels=(8, 16, 16, 16), device="cpu")
    assert sorted(p.name for p in out.iterdir()) == ["data", "metrics.json", "model", "scores.csv"]
    assert json.loads((out / "metrics.json").read_text()) == result
    scores = pd.read_csv(out / "scores.csv", keep_default_na=False)
    test = pd.read_csv(out / "data" / "test.csv")
    assert len(scores) == len(test) == 1500
    assert (scores["timestamp"] == test["timestamp"]).all()
    assert result["events_total"] == 5 and 0 <= result["events_found"] <= 5
    for key in ("precision", "recall", "f1", "root_cause_recall_at_3"):
        assert 0.0 <= result[key] <= 1.0
    assert result["epochs"] == 1 and result["train_s"] > 0 and result["total_s"] >= result["train_s"]
    render(result)
    shown = capsys.readouterr().out
    assert "anomalies found" in shown and f"{result['events_found']}/5" in shown

    from mscred.detector import MSCRED

    model = MSCRED.load(out / "model", device="cpu")
    assert model.config.train.epochs == 1 and model.sensors_ == [c for c in test.columns
                                                                 if c not in ("timestamp", "label")]
