"""`mscred inspect DATA`: a table described as `train` would read it (``mscred.data.profile``), its figures checked
against what the test puts in it: missing values, a constant sensor, a glitch, uneven times, labels, a folder."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from cli_helpers import bad_input, run_cli, sensor_frame

START = pd.Timestamp("2026-03-01 06:00:00")


def _messy(rows: int = 600) -> pd.DataFrame:
    """Sensors s0..s5 at uneven times (steps of 1 s or 30 s), with 17 missing values of s1 and 3 of s4, s2 constant,
    a glitch of 1e12 in s3 at row 101, and a label column of 12 anomalous rows."""
    frame = sensor_frame(rows, 6, seed=5)
    steps = np.random.default_rng(5).choice([1.0, 1.0, 30.0], rows)
    frame["timestamp"] = (START + pd.to_timedelta(np.cumsum(steps), unit="s")).strftime("%Y-%m-%d %H:%M:%S")
    frame.loc[40:56, "s1"] = np.nan
    frame.loc[[7, 300, 599], "s4"] = np.nan
    frame["s2"] = 2.5
    frame.loc[100, "s3"] = 1e12
    frame["label"] = 0
    frame.loc[200:211, "label"] = 1
    return frame


def test_inspect_names_what_train_would_meet(tmp_path, capsys):
    """Each figure as the table was made: rows, sensors, labels, missing counts per sensor, the constant sensor, the
    glitch and its row, uneven steps, the windows in time at the usual step; the options to try. Nothing written."""
    frame = _messy()
    data = tmp_path / "plant.csv"
    frame.to_csv(data, index=False)
    code, out, err = run_cli(capsys, "inspect", data, "--json")
    assert code == 0, err
    found = json.loads(out)
    assert (found["rows"], found["sensors"], found["label_rows"]) == (600, [f"s{j}" for j in range(6)], 12)
    assert found["missing"] == {"s1": 17, "s4": 3}
    assert found["constant"] == ["s2"]
    assert found["extreme"] == [{"sensor": "s3", "value": 1e12, "row": 101}]
    assert found["first_time"] == frame["timestamp"].iloc[0] and found["last_time"] == frame["timestamp"].iloc[-1]
    assert found["usual_step"] == "1 s" and found["uneven_steps"]["p90"] == "30 s"
    assert found["window_spans"] == {"10": "10 s", "30": "30 s", "60": "1 min"}
    assert found["suggested_options"] == ["--resample 30s", "--missing interpolate"]   # (the 90th-percentile step)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plant.csv"]
    code, out, err = run_cli(capsys, "inspect", data)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{data}: 600 rows x 6 sensors; label: 12 anomalous rows"
    assert "missing     20 values in 2 sensor(s): s1 17, s4 3" in lines
    assert "constant    s2: no signal" in lines
    assert "extreme     s3: 1e+12 at row 101 sets its range (a glitch?)" in lines
    assert lines[-1] == "suggests    --resample 30s --missing interpolate"


def test_inspect_reads_with_trains_options_and_folders(tmp_path, capsys):
    """--resample (and the other reading options) as train takes them: the rows on the grid, said; a folder gives a
    description a table; rows without times say so; a table train cannot read is exit 2 with train's one line."""
    frame = _messy().drop(columns=["label"])
    folder = tmp_path / "logs"
    folder.mkdir()
    frame.iloc[:300].to_csv(folder / "a.csv", index=False)
    frame.iloc[300:].to_csv(folder / "b.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", folder, "--resample", "1min", "--json")
    assert code == 0, err
    first, second = (json.loads(line) for line in out.splitlines())
    assert (first["source"], second["source"]) == (str(folder / "a.csv"), str(folder / "b.csv"))
    assert first["resampled_from"] == 300 and first["usual_step"] == "1 min"
    assert first["uneven_steps"] is None and first["window_spans"]["60"] == "1 h"
    untimed = tmp_path / "rows.csv"
    frame.drop(columns=["timestamp"]).to_csv(untimed, index=False)
    code, out, err = run_cli(capsys, "inspect", untimed)
    assert code == 0, err
    assert "times       none (rows are numbered); windows count rows" in out.splitlines()
    empty = tmp_path / "empty.csv"
    frame.assign(s5=np.nan).to_csv(empty, index=False)
    code, out, err = run_cli(capsys, "inspect", empty, "--json")
    assert code == 0 and err == "", err   # (no numpy warning of the all-missing sensor)
    found = json.loads(out)
    assert found["empty"] == ["s5"] and found["missing"]["s5"] == 600
    assert found["suggested_options"][0] == "--drop-columns s5"
    # a column of words (train refuses it as a sensor) is left out to describe the rest, and named
    text = tmp_path / "text.csv"
    frame.assign(site="north", unit="degC").to_csv(text, index=False)
    code, out, err = run_cli(capsys, "inspect", text)
    assert code == 0, err
    assert "text        site, unit: no number in it, left out here (train refuses it as a sensor)" in out
    assert "suggests    --drop-columns site,unit" in out
    code, out, err = run_cli(capsys, "inspect", text, "--drop-columns", "unit", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["text_columns"] == ["site"] and "unit" not in found["sensors"]
    # a sensor column with a word among its numbers is still refused, with train's one line
    mixed = frame.astype({"s1": object})
    mixed.loc[7, "s1"] = "abc"
    mixed.to_csv(text, index=False)
    bad_input(capsys, "inspect", text, names=[f"{text}: column 's1' row 8: value 'abc' is not a number"])


def test_inspect_reads_as_a_model_does(tmp_path, capsys):
    """--model: the table read as the model reads its data (here on its 30 s grid), its sensors against the
    model's, only detect's missing policy suggested; --resample beside it refused (the grid is the model's)."""
    frame = _messy().drop(columns=["label"])
    frame.to_csv(tmp_path / "train.csv", index=False)
    code, _, err = run_cli(capsys, "train", tmp_path / "train.csv", "--out", tmp_path / "model", "--resample", "30s",
                           "--missing", "interpolate", "--epochs", "1", "--set", "channels=[4,8,8,8]", "--device",
                           "cpu", "--quiet")
    assert code == 0, err
    code, out, err = run_cli(capsys, "inspect", tmp_path / "train.csv", "--model", tmp_path / "model", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert (found["resampled_from"], found["usual_step"], found["model_sensors"]) == (600, "30 s", "")
    assert found["suggested_options"] == []   # (the model interpolates; the grid is its own)
    frame.rename(columns={"s1": "x1"}).to_csv(tmp_path / "other.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "other.csv", "--model", tmp_path / "model")
    assert code == 0, err
    assert "model       other sensors: missing sensor(s) s1; unknown sensor(s) x1" in out.splitlines()
    bad_input(capsys, "inspect", tmp_path / "train.csv", "--model", tmp_path / "model", "--resample", "1min",
              names=["with --model the data is read as the model reads it (its own grid)"])


def test_inspect_suggests_hold_where_the_gaps_are_in_states_and_step_tags(tmp_path, capsys):
    """A valve's 0/1 and a pump's stages are step-like (a few values); where only they have gaps, --missing hold is
    the suggestion (their value holds between records), and where a sensor of many values has gaps too, interpolate
    with --hold of the step-like ones that have gaps."""
    rng = np.random.default_rng(1)
    rows = 400
    frame = pd.DataFrame({"timestamp": np.arange(rows), "valve": rng.integers(0, 2, rows).astype(float),
                          "pump": rng.integers(0, 3, rows).astype(float), "flow": rng.standard_normal(rows),
                          "temp": rng.standard_normal(rows)})
    frame.loc[[5, 6, 7], "valve"] = np.nan
    data = tmp_path / "steps.csv"
    for extra_gap, suggested in ((False, ["--missing hold"]), (True, ["--missing interpolate", "--hold valve"])):
        (frame.assign(flow=frame["flow"].where(frame.index != 9)) if extra_gap else frame).to_csv(data, index=False)
        code, out, err = run_cli(capsys, "inspect", data, "--json")
        assert code == 0, err
        found = json.loads(out)
        assert found["step_like"] == ["valve", "pump"]
        assert found["suggested_options"] == suggested


def test_counters_are_named_at_inspect_and_train(tmp_path, capsys):
    """A counter (bytes sent: it rises on most rows, stays on some, and resets once) and a totalizer are named; a
    noisy sine, a random walk and a state are not."""
    rng = np.random.default_rng(3)
    rows = 400
    sent = np.cumsum(rng.integers(0, 5, rows) * (rng.random(rows) < 0.8))
    sent[250:] -= sent[249]   # (the exporter restarted: the counter starts again from 0)
    frame = sensor_frame(rows, 3, seed=3).assign(
        bytes_total=sent.astype(float), energy_kwh=np.cumsum(rng.random(rows)),
        walk=np.cumsum(rng.standard_normal(rows)), state=rng.integers(0, 3, rows).astype(float))
    frame.to_csv(tmp_path / "t.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "t.csv", "--json")
    assert code == 0, err
    assert json.loads(out)["counters"] == ["bytes_total", "energy_kwh"]
    code, out, err = run_cli(capsys, "inspect", tmp_path / "t.csv")
    assert "counters    bytes_total, energy_kwh: only rise, resets aside" in out
    code, _, err = run_cli(capsys, "train", tmp_path / "t.csv", "--out", tmp_path / "m", "--epochs", "1", "--set",
                           "channels=[4,8,8,8]", "--device", "cpu", "--quiet")
    assert code == 0, err
    assert "note: 2 sensor(s) of " in err and "only rise, resets aside (bytes_total, energy_kwh): counters" in err
