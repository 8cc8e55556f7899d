"""Reading some columns of a table only (``--sensors``, ``--drop-columns``; the ``train.only_sensors`` and
``train.drop_columns`` settings, kept in the model): a status text, a unit, a comment left out, a few tags of an
export of many read, at train and at every command that reads the model's data. A table read so scores as the same
table cut to those columns beforehand, bit for bit."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from cli_helpers import ON_THE_CPU, bad_input, main, replace_waits, run_cli, sensor_frame
from mscred.cli import watch as watch_module
from mscred.data.io import TIMESTAMP, float_read_options
from mscred.data.reading import Reading
from mscred.detector import MSCRED
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")
KEPT = ["s0", "s2", "s3", "s5"]


def _export(rows: int, seed: int) -> pd.DataFrame:
    """Six sensors, a status text and a unit column between them, the time first."""
    frame = sensor_frame(rows, 6, seed=seed)
    frame.insert(3, "status", np.where(np.arange(rows) % 7, "RUN", "HOLD"))
    frame["unit"] = "degC"
    return frame


def _scores(path) -> pd.DataFrame:
    return pd.read_csv(path, **float_read_options())


def test_the_reading_leaves_out_and_keeps_columns():
    df = pd.DataFrame({"timestamp": [1, 2], " a ": [1.0, 2.0], "b": [3.0, 4.0], "note": ["x", "y"],
                       "label": [0, 1]})
    got = Reading(sensors=("b",), drop_columns=("note", "absent")).frame(df, "t.csv")
    assert list(got.columns) == ["timestamp", "b", "label"]   # (the time and the label kept; names compared stripped)
    assert list(Reading(drop_columns=("note",)).frame(df, "t.csv").columns) == ["timestamp", " a ", "b", "label"]
    assert Reading(drop_columns=("absent",)).frame(df, "t.csv") is df
    with pytest.raises(InputError, match=r"^t.csv: no column 'q' \(a sensor asked for by --sensors\), nor 'r'; its "
                                         r"sensors: 'a', 'b', 'note'$"):
        Reading(sensors=("a", "q", "r")).frame(df, "t.csv")
    assert Reading(sensors=("b", "a"), drop_columns=("note",)).options() == "--sensors b,a --drop-columns note"


@pytest.mark.parametrize("time_column, name", [(None, "timestamp"), ("Time", "Time"), ("Time", "timestamp"),
                                               (None, "label")])
def test_the_time_and_the_label_are_not_left_out(time_column, name):
    with pytest.raises(InputError, match=f"--drop-columns {name}: the .* column is read as such, not as a sensor"):
        Reading(time_column, drop_columns=(name,))


def test_a_long_table_keeps_its_sensors_lines_and_may_carry_dropped_columns():
    long = pd.DataFrame({"Time": [1, 1, 1, 2, 2, 2], "Tag": ["a", "b", "c", "a", "b", "c"],
                         "Value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "Units": ["C", "bar", "C", "C", "bar", "C"]})
    reading = Reading("Time", long_columns=("Tag", "Value"), sensors=("c", "a"), drop_columns=("Units",))
    got = reading.frame(long, "l.csv")
    assert list(got.columns) == [TIMESTAMP, "a", "c"] and got["c"].tolist() == [3.0, 6.0]
    with pytest.raises(InputError, match="other columns .'Units'. would be lost"):
        Reading("Time", long_columns=("Tag", "Value")).frame(long, "l.csv")
    with pytest.raises(InputError, match=r"^l.csv: no line of sensor 'd' in column 'Tag' \(a sensor asked for by "
                                         r"--sensors\); its sensors: 'a', 'b', 'c'$"):
        Reading("Time", long_columns=("Tag", "Value"), sensors=("d",), drop_columns=("Units",)).frame(long, "l.csv")


@pytest.mark.parametrize("settings, fragment", [
    ({"only_sensors": []}, "train.only_sensors (): must be None or a list of column names"),
    ({"only_sensors": ["a", "a"]}, "each once"),
    ({"only_sensors": ["label"]}, "neither the time column nor 'label'"),
    ({"drop_columns": ["timestamp"]}, "train.drop_columns ('timestamp',)"),
    ({"drop_columns": [" x"]}, "no blanks about it"),
    ({"only_sensors": ["a"], "drop_columns": ["a"]}, "both name 'a'"),
    ({"long_columns": ["Tag", "Value"], "drop_columns": ["Tag"]}, "nor a long table's sensor or value column"),
])
def test_bad_settings_are_refused(settings, fragment):
    with pytest.raises(InputError, match=None) as caught:
        MSCRED(**settings).resolved_config()
    assert fragment in str(caught.value)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(folder, model): a model trained on ``KEPT`` of the export, the status and unit columns left out."""
    folder = tmp_path_factory.mktemp("select_columns")
    _export(500, seed=1).to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--sensors", "s0,s2",
                 "--sensors", "s3,s5", "--drop-columns", "status,unit", *TRAIN]) == 0
    return folder, folder / "model"


def test_train_keeps_the_selection_in_the_model(trained, capsys):
    folder, model = trained
    config = json.loads((model / "config.json").read_text())["config"]["train"]
    assert config["only_sensors"] == KEPT and config["drop_columns"] == ["status", "unit"]
    assert MSCRED.load(model).sensors_ == KEPT
    code, out, err = run_cli(capsys, "info", model, "--json")
    assert code == 0, err
    assert json.loads(out)["reads_data_with"] == "--sensors s0,s2,s3,s5 --drop-columns status,unit"
    # the same weights as training on the table cut beforehand
    cut = folder / "cut.csv"
    _export(500, seed=1)[[TIMESTAMP, *KEPT]].to_csv(cut, index=False)
    assert main(["train", str(cut), "--out", str(folder / "model_cut"), *TRAIN]) == 0
    ours, theirs = MSCRED.load(model), MSCRED.load(folder / "model_cut")
    for (name, a), b in zip(ours.net_.state_dict().items(), theirs.net_.state_dict().values()):
        assert torch.equal(a, b), name


def test_detect_and_calibrate_read_the_models_columns(trained, tmp_path, capsys):
    folder, model = trained
    full, cut = tmp_path / "today.csv", tmp_path / "today_cut.csv"
    today = _export(300, seed=2)
    today.to_csv(full, index=False)
    today[[TIMESTAMP, *KEPT]].to_csv(cut, index=False)
    for name, data in (("full", full), ("cut", cut)):
        assert main(["detect", str(model), str(data), "--out", str(tmp_path / f"{name}.csv"), *ON_THE_CPU]) == 0
    got, want = _scores(tmp_path / "full.csv"), _scores(tmp_path / "cut.csv")
    pd.testing.assert_frame_equal(got, want)
    # a column the table gained since is not read: the model reads its sensors only
    today.assign(comment="ok", s9=1.0).to_csv(full, index=False)
    assert main(["detect", str(model), str(full), "--out", str(tmp_path / "c.csv"), *ON_THE_CPU]) == 0
    pd.testing.assert_frame_equal(_scores(tmp_path / "c.csv"), want)
    # a table without one of the model's sensors is refused by name
    today.drop(columns="s2").to_csv(full, index=False)
    capsys.readouterr()
    bad_input(capsys, "detect", model, full, "--out", tmp_path / "y.csv", *ON_THE_CPU,
              names=["no column 's2' (a sensor asked for by --sensors)"])


def test_drop_columns_given_at_detect_and_calibrate_add_to_the_models(tmp_path, capsys):
    """A model that leaves out 'status' only (every other column a sensor): a 'comment' column the export gained
    since is refused as a sensor it does not know, until --drop-columns comment leaves it out too."""
    model = tmp_path / "model"
    export = _export(700, seed=6).drop(columns="unit")
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", drop_columns=["status"]).fit(export).save(model)
    today = _export(300, seed=7).drop(columns="unit")
    data, cut = tmp_path / "today.csv", tmp_path / "cut.csv"
    today.drop(columns="status").to_csv(cut, index=False)
    today.assign(comment="ok").to_csv(data, index=False)
    bad_input(capsys, "detect", model, data, "--out", tmp_path / "x.csv", *ON_THE_CPU,
              names=["column 'comment'", "is not a number"])
    for name, path, extra in (("given", data, ("--drop-columns", "comment")), ("cut", cut, ())):
        assert main(["detect", str(model), str(path), "--out", str(tmp_path / f"scores_{name}.csv"), *extra,
                     *ON_THE_CPU]) == 0
    pd.testing.assert_frame_equal(_scores(tmp_path / "scores_given.csv"), _scores(tmp_path / "scores_cut.csv"))
    for name, path, extra in (("given", data, ("--drop-columns", "comment")), ("cut", cut, ())):
        assert main(["calibrate", str(model), str(path), "--out", str(tmp_path / f"recal_{name}"), *extra,
                     "--threshold", "percentile", *ON_THE_CPU]) == 0
    assert MSCRED.load(tmp_path / "recal_given").threshold_ == MSCRED.load(tmp_path / "recal_cut").threshold_
    # watch and fleet-watch of the file as it stands (--idle-exit 0: one look, then the end)
    for name, path, extra in (("given", data, ("--drop-columns", "comment")), ("cut", cut, ())):
        assert main(["watch", str(model), str(path), "--out", str(tmp_path / f"watch_{name}.csv"), "--idle-exit",
                     "0", *extra, *ON_THE_CPU]) == 0
    pd.testing.assert_frame_equal(_scores(tmp_path / "watch_given.csv"), _scores(tmp_path / "watch_cut.csv"))
    live = tmp_path / "live"
    live.mkdir()
    today.assign(comment="ok").to_csv(live / "pump_1.csv", index=False)
    # fleet-detect: a folder of model folders, a folder of one table per entity
    fleet, new = tmp_path / "fleet", tmp_path / "new"
    new.mkdir()
    MSCRED.load(model).save(fleet / "pump_1")
    today.assign(comment="ok").to_csv(new / "pump_1.csv", index=False)
    assert main(["fleet-detect", str(fleet), str(new), "--out", str(tmp_path / "fleet_scores"), "--drop-columns",
                 "comment", "--quiet", *ON_THE_CPU]) == 0
    pd.testing.assert_frame_equal(_scores(tmp_path / "fleet_scores" / "scores" / "pump_1.csv"),
                                  _scores(tmp_path / "scores_cut.csv"))
    assert main(["fleet-watch", str(fleet), str(live), "--out", str(tmp_path / "fleet_live"), "--idle-exit", "0",
                 "--drop-columns", "comment", *ON_THE_CPU]) == 0
    pd.testing.assert_frame_equal(_scores(tmp_path / "fleet_live" / "scores" / "pump_1.csv"),
                                  _scores(tmp_path / "watch_cut.csv"))


def test_the_python_api_reads_a_frame_so(trained):
    folder, model = trained
    loaded = MSCRED.load(model, device="cpu")
    today = _export(300, seed=2)
    pd.testing.assert_frame_equal(loaded.detect(today), loaded.detect(today[[TIMESTAMP, *KEPT]]))
    monitor = loaded.monitor()
    got = pd.concat([monitor.update(today.iloc[a:b]) for a, b in ((0, 150), (150, 300))], ignore_index=True)
    again = loaded.monitor()
    want = pd.concat([again.update(today[[TIMESTAMP, *KEPT]].iloc[a:b]) for a, b in ((0, 150), (150, 300))],
                     ignore_index=True)
    pd.testing.assert_frame_equal(got, want)


def test_watch_of_a_long_feed_reads_the_models_sensors_only(tmp_path, capsys, monkeypatch):
    """A long export of six tags and a unit column, of which the model was trained on four: the lines of a later
    time that are all of other tags still show the held time complete; SCORES.csv is the watch of the four tags'
    lines alone, cut so that each look scores the same times."""
    wide = sensor_frame(260, 6, seed=4)[[TIMESTAMP, "s1", "s4", *KEPT]]   # (a time's lines: two tags not read first)
    wide[TIMESTAMP] = pd.date_range("2026-01-01", periods=260, freq="min").strftime("%Y-%m-%d %H:%M:%S")
    long = wide.melt(id_vars=TIMESTAMP, var_name="Tag", value_name="Value")
    long = long.sort_values(TIMESTAMP, kind="stable").reset_index(drop=True)
    long["Units"] = "C"
    long.to_csv(tmp_path / "train.csv", index=False)
    model = tmp_path / "model"
    assert main(["train", str(tmp_path / "train.csv"), "--out", str(model), "--long", "Tag,Value", "--sensors",
                 ",".join(KEPT), "--drop-columns", "Units", *TRAIN]) == 0
    results = {}
    for name, lines in (("all", long), ("kept", long[long["Tag"].isin(KEPT)].drop(columns="Units"))):
        lines = lines.reset_index(drop=True)
        data, out = tmp_path / f"{name}.csv", tmp_path / f"{name}_scores.csv"
        # the first look: time 150 shown complete by time 151's lines -- in "all" by two of tags not read alone,
        # in "kept" by its first line of s0, held (so each look scores times 0-150, then 151-258)
        cut = int(np.flatnonzero(lines[TIMESTAMP] == wide[TIMESTAMP][151])[0]) + (2 if name == "all" else 1)
        lines.iloc[:cut].to_csv(data, index=False)
        replace_waits(monkeypatch, watch_module,
                      lambda lines=lines, cut=cut, data=data: lines.iloc[cut:].to_csv(data, mode="a", header=False,
                                                                                       index=False))
        code, _, err = run_cli(capsys, "watch", model, data, "--out", out, "--interval", "0.01", *ON_THE_CPU)
        assert code == 0, err
        results[name] = _scores(out)
    assert len(results["all"]) == 259
    pd.testing.assert_frame_equal(results["all"], results["kept"])


def test_inspect_reads_the_selection(tmp_path, capsys):
    data = tmp_path / "export.csv"
    _export(400, seed=3).to_csv(data, index=False)
    code, out, err = run_cli(capsys, "inspect", data, "--sensors", "s1,s4", "--drop-columns", "unit", "--json")
    assert code == 0, err
    assert json.loads(out)["sensors"] == ["s1", "s4"]


@pytest.mark.parametrize("argv, fragment", [
    (("--sensors", "s0,,s1"), "an empty name"),
    (("--sensors", "s0", "--sensors", "s0"), "'s0' given twice"),
    (("--drop-columns", "label"), "'label' is the ground truth's column"),
    (("--sensors", "s0,s9", "--drop-columns", "status,unit"), "no column 's9' (a sensor asked for by --sensors)"),
])
def test_train_refuses_a_bad_selection_in_one_line(tmp_path, capsys, argv, fragment):
    data = tmp_path / "export.csv"
    _export(200, seed=5).to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "model", *argv, *TRAIN, names=[fragment])
    assert not (tmp_path / "model").exists()
