"""`mscred detect MODEL DATA --out SCORES.csv --report DIR`: the page of what was found in data without ground truth
(alarms with their root causes, the score against the threshold, the sensor-score heat map, the top sensors, the
worst windows' residuals), events.csv and summary.json beside it, and SCORES.csv the same bytes as without it."""
from __future__ import annotations

import io
import json
import shutil
import sys

import pandas as pd
import pytest

from cli_helpers import bad_input, run_cli, sensor_frame, tiny_model

pytest.importorskip("matplotlib", reason="the report needs matplotlib (the report extra)")

TRAIN_ROWS = 600


@pytest.fixture(scope="module")
def series():
    frame = sensor_frame(TRAIN_ROWS + 400, 4, seed=5)
    frame.loc[TRAIN_ROWS + 200:TRAIN_ROWS + 240, "s2"] += 6.0   # an anomaly in the new rows
    return frame


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("report") / "model", series.iloc[:TRAIN_ROWS])


@pytest.fixture
def data(tmp_path, series):
    path = tmp_path / "new.csv"
    series.iloc[TRAIN_ROWS:].to_csv(path, index=False)
    return path


def test_page_events_and_summary_and_scores_unchanged(tmp_path, model_dir, data, capsys):
    plain, with_page, report = tmp_path / "plain.csv", tmp_path / "scores.csv", tmp_path / "report"
    code, _, err = run_cli(capsys, "detect", model_dir, data, "--out", plain, "--events", tmp_path / "ev.csv")
    assert code == 0, err
    code, out, err = run_cli(capsys, "detect", model_dir, data, "--out", with_page, "--report", report)
    assert code == 0, err
    assert with_page.read_bytes() == plain.read_bytes()   # the sensor scores the page needs are not written
    assert f"report: {report / 'index.html'}" in out
    assert sorted(p.name for p in report.iterdir()) == ["events.csv", "index.html", "summary.json"]
    events = pd.read_csv(report / "events.csv")
    pd.testing.assert_frame_equal(events, pd.read_csv(tmp_path / "ev.csv"))   # detect --events' alarm list
    scores = pd.read_csv(plain)
    summary = json.loads((report / "summary.json").read_text())
    assert summary["rows"] == len(scores) and summary["anomalous"] == int(scores["is_anomaly"].sum())
    assert summary["alarms"] == len(events) > 0 and summary["model"] == str(model_dir)
    page = (report / "index.html").read_text()
    for section in ("sec-alarms", "sec-score", "sec-sensor-scores", "sec-series", "sec-residuals"):
        assert f'id="{section}"' in page, section
    assert page.count("<img ") == 5   # score, heat map, series, zoom, residuals
    assert "true anomaly" not in page and 'id="alarms"' in page
    first = events.iloc[0]
    assert f"<td>{first['root_causes']}</td>" in page


def test_sensor_scores_asked_for_are_written_as_without_the_page(tmp_path, model_dir, data, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert run_cli(capsys, "detect", model_dir, data, "--out", a, "--sensor-scores")[0] == 0
    assert run_cli(capsys, "detect", model_dir, data, "--out", b, "--sensor-scores", "--report", tmp_path / "r")[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_nothing_flagged_says_so(tmp_path, model_dir, data, capsys):
    # the same model with a threshold no row reaches (config.json's threshold stays editable)
    high = tmp_path / "high"
    shutil.copytree(model_dir, high)
    config = json.loads((high / "config.json").read_text())
    config["calibration"]["threshold"] = 1e12
    config["calibration"]["scale_thresholds"] = [1e12] * len(config["calibration"]["scale_thresholds"])
    (high / "config.json").write_text(json.dumps(config))
    report = tmp_path / "report"
    code, _, err = run_cli(capsys, "detect", high, data, "--out", tmp_path / "s.csv", "--report", report)
    assert code == 0, err
    assert json.loads((report / "summary.json").read_text())["anomalous"] == 0
    page = (report / "index.html").read_text()
    assert "No row scored above the threshold." in page and page.count("<img ") == 4   # no zoom
    assert pd.read_csv(report / "events.csv").empty


def test_standard_output_and_a_folder_feed(tmp_path, model_dir, series, capsys, monkeypatch):
    feed = tmp_path / "feed"
    feed.mkdir()
    new = series.iloc[TRAIN_ROWS:]
    new.iloc[:200].to_csv(feed / "part-1.csv", index=False)
    new.iloc[200:].to_csv(feed / "part-2.csv", index=False)
    code, out, err = run_cli(capsys, "detect", model_dir, feed, "--out", tmp_path / "s.csv", "--report",
                             tmp_path / "r1")
    assert code == 0, err
    assert json.loads((tmp_path / "r1" / "summary.json").read_text())["rows"] == len(new)
    code, out, err = run_cli(capsys, "detect", model_dir, feed, "--out", tmp_path / "s.csv", "--report",
                             tmp_path / "r1", "--json")
    assert code == 0 and json.loads(out)["report"] == str(tmp_path / "r1"), err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(new.to_csv(index=False).encode())))
    code, out, err = run_cli(capsys, "detect", model_dir, "-", "--out", "-", "--report", tmp_path / "r2")
    assert code == 0, err
    assert out.startswith("timestamp,score") and (tmp_path / "r2" / "index.html").is_file()
    assert json.loads((tmp_path / "r2" / "summary.json").read_text())["data"] == "<stdin>"


def test_refusals_before_any_work(tmp_path, model_dir, data, capsys, monkeypatch):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    bad_input(capsys, "detect", model_dir, data, "--out", tmp_path / "s.csv", "--report", busy, names=(str(busy),))
    assert (busy / "notes.txt").read_text() == "mine" and not (tmp_path / "s.csv").exists()
    feed = tmp_path / "feed"
    feed.mkdir()
    data.rename(feed / "part.csv")
    bad_input(capsys, "detect", model_dir, feed, "--out", tmp_path / "s.csv", "--report", feed / "report",
              names=("is in the folder DATA",))
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # `import matplotlib` raises ImportError
    bad_input(capsys, "detect", model_dir, feed, "--out", tmp_path / "s.csv", "--report", tmp_path / "r",
              names=("pip install 'mscred[report]'",))
    assert not (tmp_path / "s.csv").exists()


def test_an_array_without_sensor_names(tmp_path, model_dir, series, capsys):
    """A .npy array's columns are the model's sensors by position (as detect reads it): the page names them so (it
    was refused as 'other sensors than the model was trained on')."""
    import numpy as np

    array = tmp_path / "new.npy"
    np.save(array, series.iloc[TRAIN_ROWS:, 1:].to_numpy())
    report = tmp_path / "report"
    code, _, err = run_cli(capsys, "detect", model_dir, array, "--out", tmp_path / "s.csv", "--report", report)
    assert code == 0, err
    page = (report / "index.html").read_text()
    assert 'id="sec-residuals"' in page and "s2" in pd.read_csv(report / "events.csv")["root_causes"].str.cat()
