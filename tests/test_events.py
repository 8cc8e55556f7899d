"""Detected anomalies as events (``mscred.events``, ``MSCRED.events``, ``mscred detect --events``)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input, run_cli, sensor_frame, tiny_model
from mscred.detector import MSCRED
from mscred.events import COLUMNS, events_table


def test_events_of_a_hand_built_scores_table():
    frame = pd.DataFrame({
        "timestamp": [10, 11, 12, 13, 14, 15, 16, 17],
        "score": [0.1, 5.0, 7.0, 6.0, 0.2, 9.0, 0.3, 8.0],
        "is_anomaly": [0, 1, 1, 1, 0, 1, 0, 1],
        "root_causes": ["", "a;b;c", "b;a;d", "b;c;a", "", "z;y;x", "", "c;b;a"],
        "scales": ["", "10", "10;30", "10", "", "10;30;60", "", "30"],
    })
    events = events_table(frame, top_k=2)
    assert list(events.columns) == COLUMNS
    assert events[["start", "end", "rows"]].values.tolist() == [[11, 13, 3], [15, 15, 1], [17, 17, 1]]
    assert events["peak_score"].tolist() == [7.0, 9.0, 8.0] and events["peak_at"].tolist() == [12, 15, 17]
    # a, b: 3 votes each; b's mean place (1 + 0 + 0) / 3 is before a's (0 + 1 + 2) / 3
    assert events["root_causes"].tolist() == ["b;a", "z;y", "c;b"]
    assert events["scales"].tolist() == ["10;30", "10;30;60", "30"]
    quiet = events_table(frame.assign(is_anomaly=0))
    assert list(quiet.columns) == COLUMNS and len(quiet) == 0


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("events") / "model", sensor_frame(600, 5))


def test_model_events_and_the_cli(model_dir, tmp_path, capsys):
    data = sensor_frame(900, 5, seed=1).iloc[600:].copy()
    data.iloc[150:200, 2] += 3.0
    model = MSCRED.load(model_dir, device="cpu")
    found = model.detect(data)
    events = model.events(data)
    flags = found["is_anomaly"].to_numpy()
    assert len(events) == int(np.sum(np.diff(np.concatenate([[0], flags])) == 1)) > 0
    assert events["rows"].sum() == flags.sum()
    path = tmp_path / "x.csv"
    data.to_csv(path, index=False)
    code, out, err = run_cli(capsys, "detect", model_dir, path, "--out", tmp_path / "s.csv", "--events",
                             tmp_path / "events.csv")
    assert code == 0, err
    assert out.rstrip().endswith(f"wrote {tmp_path / 's.csv'} and {tmp_path / 'events.csv'}")
    written = pd.read_csv(tmp_path / "events.csv", keep_default_na=False)
    assert written["start"].tolist() == events["start"].tolist()
    assert written["root_causes"].tolist() == events["root_causes"].tolist()
    code, out, err = run_cli(capsys, "detect", model_dir, path, "--out", tmp_path / "s.csv", "--json")
    summary = json.loads(out)
    assert summary == {"rows": 300, "scored": 210, "anomalous": int(flags.sum()), "intervals": len(events),
                       "threshold": model.threshold_, "context_rows": 0, "out": str(tmp_path / "s.csv"),
                       "events": None, "report": None}
    bad_input(capsys, "detect", model_dir, path, "--out", tmp_path / "s2.csv", "--events", tmp_path / "s2.csv",
              names=["--events is --out"])
    bad_input(capsys, "detect", model_dir, path, "--out", tmp_path / "s3.csv", "--events", tmp_path / "e.json",
              names=["unknown output type"])
    assert not (tmp_path / "s2.csv").exists() and not (tmp_path / "s3.csv").exists()
