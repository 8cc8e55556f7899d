"""``--metrics FILE.prom`` of `mscred watch`, `mscred fleet-watch` and `mscred fleet-detect`: Prometheus' text
format for node_exporter's textfile collector. The file is parsed here as the format defines it (``_parse``: HELP
and TYPE once per family, before its samples; label values escaped) and its numbers compared with what the same
command wrote to SCORES.csv or summary.csv."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input, main, replace_waits, run_cli, sensor_frame, tiny_model
from mscred.data.io import float_read_options
from mscred.cli import prometheus as watch_metrics
from mscred.cli.prometheus import MetricsFile
from mscred.cli.watch_output import Scores
from mscred.detector import MSCRED

TRAIN_ROWS = 600
_SAMPLE = re.compile(r'([a-z_]+)(?:\{((?:[a-z_]+="(?:[^"\\\n]|\\[\\"n])*",?)+)\})? (\S+)')
_LABEL = re.compile(r'([a-z_]+)="((?:[^"\\\n]|\\[\\"n])*)"')


def _parse(text: str) -> dict:
    """{(family, ((label, value), ...)): value} of a text-format file, checking its shape on the way: every sample
    after its family's HELP and TYPE, each family's lines together, a family's TYPE once, the file ending in a line
    feed."""
    assert text.endswith("\n")
    samples, seen, current = {}, set(), None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            family = line.split()[2]
            if line.startswith("# HELP "):
                assert family not in seen, f"{family} listed twice"
                seen.add(family)
                current = family
            else:
                assert family == current and line.split()[3] in ("gauge", "counter"), line
            continue
        match = _SAMPLE.fullmatch(line)
        assert match and match.group(1) == current, line
        labels = tuple((k, v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\"))
                       for k, v in _LABEL.findall(match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def _of(samples: dict, family: str, **labels) -> float:
    return samples[(family, tuple(labels.items()))]


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    return sensor_frame(TRAIN_ROWS + 400, 4, seed=5)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("metrics") / "model", series.iloc[:TRAIN_ROWS])


def test_watch_metrics_are_its_scores(tmp_path, model_dir, series, capsys):
    """After a watch of 400 rows: the last row's score, sensor scores and state, the counts of its summary, the
    threshold of its model."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out, prom = tmp_path / "feed.csv", tmp_path / "s.csv", tmp_path / "m.prom"
    feed.to_csv(data, index=False)
    assert main(["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--idle-exit", "0",
                 "--sensor-scores", "--metrics", str(prom), "--json"]) == 0
    import json

    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    samples = _parse(prom.read_text())
    written, feed_label = pd.read_csv(out), {"data": str(data)}
    last = written.iloc[-1]
    assert _of(samples, "mscred_rows_scored_total", **feed_label) == summary["rows"] == 400
    assert _of(samples, "mscred_anomalous_rows_total", **feed_label) == summary["anomalous"] > 0
    assert _of(samples, "mscred_alarms_total", **feed_label) == summary["alarms"] > 0
    assert _of(samples, "mscred_threshold", **feed_label) == MSCRED.load(model_dir, device="cpu").threshold_
    assert _of(samples, "mscred_score", **feed_label) == pytest.approx(last["score"], rel=1e-15)
    assert _of(samples, "mscred_anomalous", **feed_label) == last["is_anomaly"]
    for sensor in ("s0", "s1", "s2", "s3"):
        assert _of(samples, "mscred_sensor_score", **feed_label, sensor=sensor) == \
            pytest.approx(last[f"score_{sensor}"], rel=1e-15)
    assert _of(samples, "mscred_stopped", **feed_label) == 0
    assert _of(samples, "mscred_last_scored_timestamp_seconds", **feed_label) > 1.7e9
    assert not any(family == "mscred_last_row_timestamp_seconds" for family, _ in samples)   # (rows numbered)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temporary file left


def test_a_bad_row_says_stopped(tmp_path, model_dir, series, capsys):
    feed = series.iloc[TRAIN_ROWS:TRAIN_ROWS + 130].reset_index(drop=True).astype(object)
    feed.iloc[125, 2] = "n/a"
    data, prom = tmp_path / "feed.csv", tmp_path / "m.prom"
    feed.to_csv(data, index=False)
    assert main(["watch", str(model_dir), str(data), "--out", str(tmp_path / "s.csv"), "--device", "cpu",
                 "--idle-exit", "0", "--metrics", str(prom)]) == 2
    samples = _parse(prom.read_text())
    assert _of(samples, "mscred_stopped", data=str(data)) == 1
    assert _of(samples, "mscred_rows_scored_total", data=str(data)) == 0


def test_dates_give_the_last_rows_time(tmp_path):
    """A timestamp column of dates: the last row's time in Unix seconds (naive times as UTC); label values with a
    quote, a backslash and a line feed escaped as the format asks."""
    times = pd.date_range("2026-12-05 13:00", periods=3, freq="s")
    chunk = pd.DataFrame({"timestamp": times, "score": np.float32([1, 9, 2]), "is_anomaly": [0, 1, 1],
                          "root_causes": ["", "s2;s0", "s2"], "scales": ["", "10", "10"]})
    scores = Scores(tmp_path / "s.csv", threshold=np.float32(5.5), as_json=True)   # (numpy's float32: a float)
    scores.add(chunk)
    scores.close()
    name = 'pump "7"\\east\nline'
    samples = _parse(MetricsFile(tmp_path / "m.prom", label="entity").render({name: (scores, None)}, now=2e9))
    assert _of(samples, "mscred_last_row_timestamp_seconds", entity=name) == times[-1].tz_localize("UTC").timestamp()
    assert _of(samples, "mscred_anomalous", entity=name) == 1
    assert (_of(samples, "mscred_alarms_total", entity=name), _of(samples, "mscred_score", entity=name)) == (1, 2)
    assert _of(samples, "mscred_watch_last_poll_timestamp_seconds", entity=name) == 2e9
    assert _of(samples, "mscred_threshold", entity=name) == 5.5
    for text, seconds in [("2024-03-31 00:59:00+01:00", 1711843140.0), ("2024-03-31T00:59:00", 1711846740.0),
                          ("31/03/2024 00:59", None)]:   # (as SCORES.csv keeps DATA's text)
        scores.last = scores.last.copy()
        scores.last["timestamp"] = text
        samples = _parse(MetricsFile(tmp_path / "m.prom", label="entity").render({"e": (scores, None)}, now=2e9))
        assert samples.get(("mscred_last_row_timestamp_seconds", (("entity", "e"),))) == seconds, text


def test_written_when_rows_came_or_the_heartbeat_is_due(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(watch_metrics.time, "time", lambda: clock[0])
    scores = Scores(tmp_path / "s.csv", threshold=1.0)
    metrics = MetricsFile(tmp_path / "m.prom", label="data")
    writes = []
    monkeypatch.setattr(metrics, "write", lambda feeds, now=None: writes.append(clock[0]) or
                        setattr(metrics, "written_at", clock[0]))
    for step, gained in [(0, False), (1, False), (2, True), (2.5, True), (3, False), (7.5, False), (8, True),
                         (9, True)]:
        clock[0] = 1000.0 + step
        metrics.after_poll({"f": (scores, None)}, gained)
    # the first poll, rows, the heartbeat, rows a second after the last write (not those within a second of one)
    assert writes == [1000.0, 1002.0, 1007.5, 1009.0]


@pytest.mark.parametrize("name,message", [("m.txt", "reads only *.prom files"), ("folder.prom", "is a directory")])
def test_refused_before_it_starts(tmp_path, model_dir, series, capsys, name, message):
    data = tmp_path / "feed.csv"
    series.iloc[TRAIN_ROWS:TRAIN_ROWS + 120].to_csv(data, index=False)
    (tmp_path / "folder.prom").mkdir()
    bad_input(capsys, "watch", model_dir, data, "--out", tmp_path / "s.csv", "--device", "cpu", "--idle-exit", "0",
              "--metrics", tmp_path / name, names=(message,))
    assert not (tmp_path / "s.csv").exists()


def test_fleet_watch_labels_each_entity(tmp_path, model_dir, series, capsys, monkeypatch):
    """Two entities in one file, each family's samples together; b stopped by a bad row at the first wait."""
    from mscred.cli import watch as command

    fleet, live, prom = tmp_path / "fleet", tmp_path / "live", tmp_path / "fleet.prom"
    for entity in ("a", "b"):
        shutil.copytree(model_dir, fleet / entity)
    live.mkdir()
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    feed.iloc[:150].to_csv(live / "a.csv", index=False)
    feed.iloc[:120].to_csv(live / "b.csv", index=False)
    bad = feed.iloc[120:122].astype(object)
    bad.iloc[1, 2] = "n/a"

    def first():
        bad.to_csv(live / "b.csv", mode="a", header=False, index=False)
        feed.iloc[150:170].to_csv(live / "a.csv", mode="a", header=False, index=False)

    replace_waits(monkeypatch, command, first)
    assert main(["fleet-watch", str(fleet), str(live), "--out", str(tmp_path / "out"), "--device", "cpu",
                 "--metrics", str(prom)]) == 1
    samples = _parse(prom.read_text())
    assert (_of(samples, "mscred_rows_scored_total", entity="a"), _of(samples, "mscred_stopped", entity="a")) == \
        (170, 0)
    assert (_of(samples, "mscred_rows_scored_total", entity="b"), _of(samples, "mscred_stopped", entity="b")) == \
        (120, 1)
    scores_a = pd.read_csv(tmp_path / "out" / "scores" / "a.csv")
    assert _of(samples, "mscred_score", entity="a") == pytest.approx(scores_a["score"].iloc[-1], rel=1e-15)


def test_sigterm_leaves_the_last_state(tmp_path, model_dir, series, capsys, monkeypatch):
    """`systemctl stop` (SIGTERM) after one appended piece: the file holds the rows of both pieces, then exit 143."""
    from mscred.cli import watch as command
    from mscred.cli.main import Terminated

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, prom = tmp_path / "feed.csv", tmp_path / "m.prom"
    feed.iloc[:120].to_csv(data, index=False)
    replace_waits(monkeypatch, command, lambda: feed.iloc[120:150].to_csv(data, mode="a", header=False,
                                                                           index=False), stop=Terminated)
    assert main(["watch", str(model_dir), str(data), "--out", str(tmp_path / "s.csv"), "--device", "cpu",
                 "--metrics", str(prom)]) == 143
    assert _of(_parse(prom.read_text()), "mscred_rows_scored_total", data=str(data)) == 150


def test_fleet_detect_run(tmp_path, model_dir, series, capsys):
    """`fleet-detect --metrics`: the run's end and duration, and per entity whether it was scored and why not (a
    short status label), with the numbers of summary.csv for the scored ones; written on a partly failed run."""
    import time

    fleet, new, prom = tmp_path / "fleet", tmp_path / "new", tmp_path / "fd.prom"
    for entity in ("a", "b", "c"):
        shutil.copytree(model_dir, fleet / entity)
    new.mkdir()
    series.iloc[TRAIN_ROWS:].to_csv(new / "a.csv", index=False)
    series.iloc[TRAIN_ROWS:].rename(columns={"s1": "x"}).to_csv(new / "b.csv", index=False)   # other sensors
    before = time.time()
    code, _, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "out", "--device", "cpu",
                           "--metrics", prom)
    assert code == 1, err   # (b was not scored)
    samples = _parse(prom.read_text())
    # (floats as written: pandas' default parser may read a unit in the last place off, as on the H100 2026-12-06)
    summary = pd.read_csv(tmp_path / "out" / "summary.csv", **float_read_options()).set_index("entity")
    assert _of(samples, "mscred_fleet_detect_scored", entity="a", status="ok") == 1
    assert _of(samples, "mscred_fleet_detect_scored", entity="b", status="bad input") == 0
    assert _of(samples, "mscred_fleet_detect_scored", entity="c", status="no new data") == 0
    for family, column in [("rows", "rows"), ("anomalous_rows", "anomalous"), ("intervals", "intervals"),
                           ("threshold", "threshold")]:
        assert _of(samples, f"mscred_fleet_detect_{family}", entity="a") == summary.loc["a", column]
    assert not any(labels == (("entity", "b"),) for _, labels in samples)   # (no numbers for what was not scored)
    ended = _of(samples, "mscred_fleet_detect_last_run_timestamp_seconds")
    assert before <= ended <= time.time() and 0 < _of(samples, "mscred_fleet_detect_duration_seconds") < 600


def test_detect_run(tmp_path, model_dir, series, capsys, monkeypatch):
    """`detect --metrics`: the run's numbers against SCORES.csv and the summary; from standard input labelled
    `<stdin>`; a refused run leaves the last good run's file as it was."""
    import io
    import json
    import sys

    data, out, prom = tmp_path / "new.csv", tmp_path / "s.csv", tmp_path / "d.prom"
    series.iloc[TRAIN_ROWS:].to_csv(data, index=False)
    code, stdout, err = run_cli(capsys, "detect", model_dir, data, "--out", out, "--device", "cpu", "--metrics",
                                prom, "--json")
    assert code == 0, err
    summary, scores, samples = json.loads(stdout), pd.read_csv(out), _parse(prom.read_text())
    label = {"data": str(data)}
    assert _of(samples, "mscred_detect_rows", **label) == summary["rows"] == len(scores)
    assert _of(samples, "mscred_detect_scored_rows", **label) == summary["scored"]
    assert _of(samples, "mscred_detect_anomalous_rows", **label) == summary["anomalous"] == scores["is_anomaly"].sum()
    assert _of(samples, "mscred_detect_intervals", **label) == summary["intervals"]
    assert _of(samples, "mscred_detect_threshold", **label) == summary["threshold"]
    assert _of(samples, "mscred_detect_last_score", **label) == pytest.approx(scores["score"].iloc[-1], rel=1e-15)
    assert _of(samples, "mscred_detect_duration_seconds", **label) > 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.read_bytes())))
    assert run_cli(capsys, "detect", model_dir, "-", "--out", "-", "--device", "cpu", "--metrics", prom)[0] == 0
    assert _of(_parse(prom.read_text()), "mscred_detect_rows", data="<stdin>") == len(scores)
    written = prom.read_bytes()
    bad_input(capsys, "detect", model_dir, tmp_path / "missing.csv", "--out", out, "--metrics", prom,
              names=["file not found"])
    assert prom.read_bytes() == written
    bad_input(capsys, "detect", model_dir, data, "--out", out, "--metrics", tmp_path / "d.txt", names=[".prom"])
