"""How a table's cells are read beyond its format (``mscred.data.reading``), as a historian's export needs it:

- ``--time-column NAME``: a time column not named 'timestamp' ("Time", "Date Time") read as if it were, at train
  and kept in the model for detect, watch, calibrate and the fleet commands, and given to evaluate for its labels and
  data. Without it such a column is refused, the message naming the option.
- ``--na-value TEXT``: text that stands for a missing value ("Bad", "I/O Timeout") read as one, then the missing
  policy decides; kept in the model as the time column is, the scoring commands' own added to it."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, main, run_cli, sensor_frame
from mscred.data.io import TIMESTAMP, load_table, table_from_frame
from mscred.data.reading import Reading, missing_text, named_time_column, widened
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")


def _dated(rows: int, seed: int = 0, name: str = "Time") -> pd.DataFrame:
    """sensor_frame with its time as minutes from 2026-01-01 in a column called ``name``."""
    frame = sensor_frame(rows, 4, seed=seed).rename(columns={TIMESTAMP: name})
    frame[name] = pd.date_range("2026-01-01", periods=rows, freq="min")
    return frame


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(folder, model trained with --time-column 'Date Time', its CSV) -- a name with a blank, as exports have."""
    folder = tmp_path_factory.mktemp("time_column")
    data = folder / "train.csv"
    _dated(600, name="Date Time").to_csv(data, index=False)
    assert main(["train", str(data), "--out", str(folder / "model"), "--time-column", "Date Time", *TRAIN]) == 0
    return folder, folder / "model", data


def test_the_model_keeps_the_name_and_detect_reads_it(trained, tmp_path, capsys):
    folder, model, data = trained
    assert json.loads((model / "config.json").read_text())["config"]["train"]["time_column"] == "Date Time"
    code, out, _ = run_cli(capsys, "info", model)
    assert code == 0 and "reads data  as --time-column 'Date Time' (kept from train;" in out
    code, _, err = run_cli(capsys, "detect", model, data, "--out", tmp_path / "s.csv", *ON_THE_CPU)
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "s.csv")
    assert list(scores.columns[:2]) == [TIMESTAMP, "score"]   # (SCORES.csv names it as always)
    assert scores[TIMESTAMP].iloc[0] == "2026-01-01 00:00:00" and len(scores) == 600
    # the same rows with the column named 'timestamp' and the option given as another name: the same scores
    renamed = tmp_path / "renamed.csv"
    pd.read_csv(data).rename(columns={"Date Time": "t"}).to_csv(renamed, index=False)
    code, _, err = run_cli(capsys, "detect", model, renamed, "--out", tmp_path / "s2.csv", "--time-column", "t",
                           *ON_THE_CPU)
    assert code == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "s2.csv"), scores)


def test_calibrate_and_evaluate_read_it(trained, tmp_path, capsys):
    folder, model, data = trained
    code, out, err = run_cli(capsys, "calibrate", model, data, "--out", tmp_path / "recal", *ON_THE_CPU)
    assert code == 0 and "calibrated on" in out, err
    assert run_cli(capsys, "detect", model, data, "--out", tmp_path / "s.csv", *ON_THE_CPU)[0] == 0
    labels = tmp_path / "labels.csv"
    pd.read_csv(data).assign(label=0).to_csv(labels, index=False)
    bad_input(capsys, "evaluate", tmp_path / "s.csv", "--labels", labels,
              names=["column 'Date Time'", "--time-column 'Date Time'"])
    code, out, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels", labels, "--time-column",
                             "Date Time", "--data", data, "--json")
    assert code == 0, err
    assert json.loads(out)["n_rows"] == 600


def test_without_the_option_the_message_names_it(tmp_path, capsys):
    data = tmp_path / "d.csv"
    _dated(200).to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "m", *TRAIN,
              names=["column 'Time' row 1", "is not a number", "--time-column Time"])
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("given, fragments", [
    ("nope", ["no column 'nope' (the time column asked for)", "its columns: 'Time', 's0'"]),
    ("s1", ["column 's1' (read as the time) row", "increasing time order"]),
])
def test_a_wrong_name_is_bad_input(tmp_path, capsys, given, fragments):
    data = tmp_path / "d.csv"
    _dated(200).to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "m", *TRAIN, "--time-column", given, names=fragments)


def test_a_timestamp_column_beside_it_is_refused(tmp_path):
    frame = _dated(50).assign(timestamp=np.arange(50))
    with pytest.raises(InputError, match="columns 'Time' .* and 'timestamp' both"):
        named_time_column(frame, "Time", "f.csv")
    twice = pd.DataFrame([[1, 2, 3]], columns=["Time", "Time ", "a"])   # (names compare stripped, as read)
    with pytest.raises(InputError, match="duplicate column name"):
        named_time_column(twice, "Time", "f.csv")
    array = tmp_path / "a.npy"
    np.save(array, np.zeros((10, 3)))
    with pytest.raises(InputError, match="an array without column names has no column 'Time'"):
        load_table(array, reading=Reading("Time"))


@pytest.mark.parametrize("sep, point", [(",", "."), (";", ",")])
def test_read_as_timestamp_is_in_every_format(tmp_path, sep, point):
    """The reader's handling of a 'timestamp' column -- epoch seconds kept as written where float64 would make
    neighbours equal, decimal commas in a ';'-separated file -- applies to the named column too; a Parquet file's
    column is named as a CSV's."""
    path = tmp_path / "t.csv"
    rows = [f"1700000000{point}000000{i}{sep}{i}{point}5{sep}1" for i in range(6)]
    path.write_text("\n".join([f"Epoch{sep}a{sep}b", *rows]) + "\n")
    table = load_table(path, reading=Reading("Epoch"))
    assert table.sensors == ["a", "b"] and table.index.name == TIMESTAMP
    assert list(table.values[:, 0]) == [i + 0.5 for i in range(6)]
    assert len(set(table.index)) == 6   # kept as written, not rounded together
    frame = pd.DataFrame({"Epoch": pd.date_range("2026-01-01", periods=6, freq="s"), "a": np.arange(6.0)})
    frame.to_parquet(tmp_path / "t.parquet")
    assert load_table(tmp_path / "t.parquet", reading=Reading("Epoch")).index[0] == pd.Timestamp("2026-01-01")
    # no change where the name is 'timestamp' or not given
    plain = frame.rename(columns={"Epoch": TIMESTAMP})
    assert named_time_column(plain, None, "x") is plain and named_time_column(plain, TIMESTAMP, "x") is plain
    assert table_from_frame(named_time_column(frame, "Epoch", "x")).sensors == ["a"]


def test_the_python_setting(tmp_path):
    """MSCRED(time_column=...) reads a frame's column of that name as the time; a frame indexed by its times, or
    with a 'timestamp' column, is read as before."""
    from mscred.detector import MSCRED

    frame = _dated(300)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", time_column="Time").fit(frame)
    found = model.detect(frame)
    assert found[TIMESTAMP].iloc[0] == pd.Timestamp("2026-01-01")
    pd.testing.assert_frame_equal(model.detect(frame.rename(columns={"Time": TIMESTAMP})), found)
    model.save(tmp_path / "m")
    assert MSCRED.load(tmp_path / "m").config_.train.time_column == "Time"
    with pytest.raises(ValueError, match="train.time_column"):
        MSCRED(time_column=" ").fit(frame)


def test_watch_and_the_fleet_commands_read_the_models_name(tmp_path, capsys):
    live, tables = tmp_path / "live", tmp_path / "tables"
    live.mkdir()
    tables.mkdir()
    for name, seed in (("pump", 1), ("fan", 2)):
        _dated(300, seed=seed).to_csv(tables / f"{name}.csv", index=False)
    code, _, err = run_cli(capsys, "fleet", tables, "--out", tmp_path / "fleet", "--time-column", "Time", *TRAIN)
    assert code == 0, err
    code, _, err = run_cli(capsys, "fleet-detect", tmp_path / "fleet", tables, "--out", tmp_path / "scores",
                           "--quiet", *ON_THE_CPU)
    assert code == 0, err
    detected = pd.read_csv(tmp_path / "scores" / "scores" / "pump.csv")
    assert detected[TIMESTAMP].iloc[-1] == "2026-01-01 04:59:00"
    (live / "pump.csv").write_bytes((tables / "pump.csv").read_bytes())
    code, _, err = run_cli(capsys, "fleet-watch", tmp_path / "fleet", live, "--out", tmp_path / "watched",
                           "--idle-exit", "0", *ON_THE_CPU)
    assert code == 0, err
    watched = pd.read_csv(tmp_path / "watched" / "scores" / "pump.csv")
    pd.testing.assert_frame_equal(watched[[TIMESTAMP, "score"]], detected[[TIMESTAMP, "score"]], atol=1e-6)
    model = tmp_path / "fleet" / "models" / "pump"
    code, _, err = run_cli(capsys, "watch", model, live / "pump.csv", "--out", tmp_path / "w.csv",
                           "--idle-exit", "0", *ON_THE_CPU)
    assert code == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "w.csv"), watched)
    bad_input(capsys, "watch", model, live / "pump.csv", "--out", tmp_path / "w2.csv", "--idle-exit", "0",
              "--time-column", "When", *ON_THE_CPU, names=["no column 'When'"])


# ---------------------------------------------------------------------------------------------------- --na-value
def _with_states(rows: int, seed: int = 0) -> pd.DataFrame:
    """sensor_frame with a historian's states in place of some values: 'Bad' in s1, ' I/O Timeout ' (padded, as a
    spreadsheet pads it) in s2."""
    frame = sensor_frame(rows, 4, seed=seed).astype({"s1": object, "s2": object, "s3": object})
    frame.loc[[20, 21, 150], "s1"] = "Bad"
    frame.loc[[60], "s2"] = " I/O Timeout "
    return frame


def test_missing_text_is_read_as_missing_then_the_policy_decides(tmp_path, capsys):
    data = tmp_path / "states.csv"
    _with_states(400).to_csv(data, index=False)
    line = bad_input(capsys, "train", data, "--out", tmp_path / "m", *TRAIN,
                     names=["column 's1' row 21", "'Bad'", "is not a number", "--na-value Bad reads it as missing"])
    assert "text column" not in line   # (the column's other values are numbers)
    _with_states(400).assign(site="north").to_csv(tmp_path / "site.csv", index=False)
    bad_input(capsys, "train", tmp_path / "site.csv", "--out", tmp_path / "m", *TRAIN, "--na-value", "Bad",
              "--na-value", "I/O Timeout", "--missing", "interpolate",
              names=["column 'site' row 1", "(a text column, no number in it? only 'timestamp' and 'label' may hold "
                     "text: --drop-columns site leaves it out; or a state for a failed value? --na-value north reads "
                     "it as missing"])
    bad_input(capsys, "train", data, "--out", tmp_path / "m", *TRAIN, "--na-value", "Bad", "--na-value",
              "I/O Timeout", names=["column 's1' row 21", "missing value", "--missing interpolate"])
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", *TRAIN, "--na-value", "Bad",
                           "--na-value", "I/O Timeout", "--missing", "interpolate")
    assert code == 0, err
    assert "interpolated 4 missing value(s)" in err
    config = json.loads((tmp_path / "m" / "config.json").read_text())["config"]["train"]
    assert config["na_values"] == ["Bad", "I/O Timeout"] and config["missing"] == "interpolate"
    # detect reads the model's text; text it was not given is refused until given
    later = tmp_path / "later.csv"
    frame = _with_states(400, seed=1)
    frame.loc[[300], "s3"] = "Comm Fail"
    frame.to_csv(later, index=False)
    bad_input(capsys, "detect", tmp_path / "m", later, "--out", tmp_path / "s.csv", *ON_THE_CPU,
              names=["column 's3' row 301", "'Comm Fail'"])
    code, _, err = run_cli(capsys, "detect", tmp_path / "m", later, "--out", tmp_path / "s.csv",
                           "--na-value", "Comm Fail", *ON_THE_CPU)
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "s.csv")
    assert list(scores["filled"].iloc[[20, 60, 300]]) == [1, 1, 1]   # (each row's interpolated values, counted)
    # the same rows with the states as empty cells: the same scores
    blank = tmp_path / "blank.csv"
    frame.replace({"Bad": np.nan, " I/O Timeout ": np.nan, "Comm Fail": np.nan}).to_csv(blank, index=False)
    assert run_cli(capsys, "detect", tmp_path / "m", blank, "--out", tmp_path / "b.csv", *ON_THE_CPU)[0] == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "b.csv"), scores)
    # watch reads the model's text too, line by line
    code, _, err = run_cli(capsys, "watch", tmp_path / "m", later, "--out", tmp_path / "w.csv", "--idle-exit", "0",
                           "--na-value", "Comm Fail", *ON_THE_CPU)
    assert code == 0, err
    watched = pd.read_csv(tmp_path / "w.csv")
    pd.testing.assert_frame_equal(watched[[TIMESTAMP, "score"]], scores[[TIMESTAMP, "score"]], atol=1e-6)


def test_states_among_decimal_commas(tmp_path, capsys):
    """A European historian's export: ';'-separated, decimal commas, and states where values failed. The states do
    not stop their columns' decimal commas being read (a cell without a digit is no number in another notation):
    with --na-value the model is the one the file with empty cells trains, wide or long; without it the state is
    refused at its cell, with the option's hint. A cell with a decimal point among decimal commas is still
    refused (which mark means what would be a guess: test_cli_messy)."""
    frame = _with_states(400)
    points = frame.map(lambda v: f"{v:.6f}" if isinstance(v, float) else v).assign(**{TIMESTAMP: frame[TIMESTAMP]})
    commas = points.map(lambda v: v.replace(".", ",") if isinstance(v, str) and v[-1].isdigit() else v)
    commas.to_csv(tmp_path / "eu.csv", sep=";", index=False)
    points.replace({"Bad": "", " I/O Timeout ": ""}).to_csv(tmp_path / "blank.csv", index=False)
    bad_input(capsys, "train", tmp_path / "eu.csv", "--out", tmp_path / "m0", *TRAIN, "--missing", "interpolate",
              names=["column 's1' row 21", "'Bad'", "--na-value Bad reads it as missing"])
    states = ("--na-value", "Bad", "--na-value", "I/O Timeout", "--missing", "interpolate")
    long = commas.melt(id_vars=TIMESTAMP, var_name="Tag", value_name="Value").sort_values(TIMESTAMP, kind="stable")
    long.to_csv(tmp_path / "eu_long.csv", sep=";", index=False)
    for name, data, options in (("wide", "eu.csv", ()), ("long", "eu_long.csv", ("--long", "Tag,Value")),
                                ("blank", "blank.csv", ())):
        code, _, err = run_cli(capsys, "train", tmp_path / data, "--out", tmp_path / name, *TRAIN, *states, *options)
        assert code == 0, err
    from safetensors.numpy import load_file

    blank = load_file(tmp_path / "blank" / "model.safetensors")
    for name in ("wide", "long"):   # (the weights to the bit: the same numbers, read from either notation)
        weights = load_file(tmp_path / name / "model.safetensors")
        assert weights.keys() == blank.keys() and all(np.array_equal(weights[k], blank[k]) for k in blank), name


def test_missing_text_leaves_the_time_the_label_and_numbers_alone():
    frame = pd.DataFrame({TIMESTAMP: ["Bad", "2"], "label": ["Bad", "0"], "a": [" Bad", "1.5"],
                          "b": [1.0, 2.0], "c": ["Badly", "3"]})
    out = missing_text(frame, ("Bad",))
    assert list(out[TIMESTAMP]) == ["Bad", "2"] and list(out["label"]) == ["Bad", "0"]
    assert pd.isna(out["a"].iloc[0]) and out["a"].iloc[1] == "1.5"
    assert list(out["c"]) == ["Badly", "3"] and list(out["b"]) == [1.0, 2.0]
    assert frame["a"].iloc[0] == " Bad"   # (a copy: the caller's frame is not changed)
    assert missing_text(frame, ()) is frame


def test_missing_text_in_python_and_parquet(tmp_path):
    from mscred.detector import MSCRED

    frame = _with_states(300)
    frame.astype({"s1": str, "s2": str}).to_parquet(tmp_path / "states.parquet")   # (text columns, as exported)
    table = load_table(tmp_path / "states.parquet", missing="interpolate",
                       reading=Reading(na_values=("Bad", "I/O Timeout")))
    assert table.filled == {"s1": 3, "s2": 1}
    with pytest.raises(InputError, match="value 'Bad' is not a number"):
        MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu").fit(frame)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", missing="interpolate",
                   na_values=["Bad", "I/O Timeout"]).fit(frame)
    found = model.detect(frame)
    assert len(found) == 300 and np.isfinite(found["score"]).all()
    with pytest.raises(ValueError, match="train.na_values"):
        MSCRED(na_values=[""]).fit(frame)


def test_evaluate_reads_labels_and_data_with_it(tmp_path, capsys):
    data = tmp_path / "states.csv"
    _with_states(400).assign(label=0).to_csv(data, index=False)
    assert run_cli(capsys, "train", data, "--out", tmp_path / "m", *TRAIN, "--na-value", "Bad", "--na-value",
                   "I/O Timeout", "--missing", "interpolate")[0] == 0
    assert run_cli(capsys, "detect", tmp_path / "m", data, "--out", tmp_path / "s.csv", *ON_THE_CPU)[0] == 0
    bad_input(capsys, "evaluate", tmp_path / "s.csv", "--labels", data, "--missing", "interpolate",
              names=["'Bad'", "is not a number"])
    code, out, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels", data, "--missing", "interpolate",
                             "--na-value", "Bad", "--na-value", "I/O Timeout", "--json")
    assert code == 0, err
    assert json.loads(out)["n_rows"] == 400


# ---------------------------------------------------------------------------------------------------- --long
def _long(frame: pd.DataFrame) -> pd.DataFrame:
    """A wide frame (timestamp + sensors) as a long one: a row per time and sensor, grouped by sensor."""
    return frame.melt(id_vars=TIMESTAMP, var_name="Tag", value_name="Value")


def test_a_long_table_scores_as_its_wide_table(tmp_path, capsys):
    wide = sensor_frame(400, 4)
    wide[TIMESTAMP] = pd.date_range("2026-01-01", periods=400, freq="min").strftime("%Y-%m-%d %H:%M:%S")
    wide.to_csv(tmp_path / "wide.csv", index=False)
    shuffled = _long(wide).sample(frac=1.0, random_state=0)   # (ISO times: sorted as dates)
    shuffled.to_csv(tmp_path / "long.csv", index=False)
    assert run_cli(capsys, "train", tmp_path / "wide.csv", "--out", tmp_path / "m", *TRAIN)[0] == 0
    assert run_cli(capsys, "detect", tmp_path / "m", tmp_path / "wide.csv", "--out", tmp_path / "w.csv",
                   *ON_THE_CPU)[0] == 0
    code, _, err = run_cli(capsys, "detect", tmp_path / "m", tmp_path / "long.csv", "--out", tmp_path / "l.csv",
                           "--long", "Tag,Value", *ON_THE_CPU)
    assert code == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "l.csv"), pd.read_csv(tmp_path / "w.csv"))
    # trained on the long table, the model keeps --long: detect reads it without being told (watch too:
    # tests/test_watch_long.py)
    code, _, err = run_cli(capsys, "train", tmp_path / "long.csv", "--out", tmp_path / "ml", "--long", "Tag,Value",
                           *TRAIN)
    assert code == 0, err
    assert json.loads((tmp_path / "ml" / "config.json").read_text())["config"]["train"]["long_columns"] == \
        ["Tag", "Value"]
    assert run_cli(capsys, "detect", tmp_path / "ml", tmp_path / "long.csv", "--out", tmp_path / "l2.csv",
                   *ON_THE_CPU)[0] == 0


def test_a_time_a_sensor_lacks_is_a_missing_value(tmp_path, capsys):
    long = _long(sensor_frame(300, 4)).drop(index=[5, 305]).astype({"Value": object})   # s0 at 5, s1 at 5
    long.loc[long.index[700], "Value"] = "Bad"
    long.to_csv(tmp_path / "long.csv", index=False)
    args = ("train", tmp_path / "long.csv", "--out", tmp_path / "m", "--long", "Tag,Value", *TRAIN)
    bad_input(capsys, *args, "--na-value", "Bad", names=["column 's0' row 6 (time 5)", "missing value"])
    code, _, err = run_cli(capsys, *args, "--na-value", "Bad", "--missing", "interpolate")
    assert code == 0, err
    assert "interpolated 3 missing value(s)" in err


@pytest.mark.parametrize("change, fragments", [
    (lambda f: pd.concat([f, f.iloc[[7]]]), ["row 1201: sensor 's0' at 7 a second time"]),
    (lambda f: f.assign(unit="degC"), ["other columns ('unit')", "drop them"]),
    (lambda f: f.assign(Tag=f["Tag"].where(f.index != 3)), ["column 'Tag' row 4: no sensor name"]),
    (lambda f: f.drop(columns=[TIMESTAMP]), ["needs its time column"]),
    (lambda f: f.rename(columns={"Value": "v"}), ["no column 'Value' (the long table's value column"]),
])
def test_a_bad_long_table_is_refused_naming_the_row(tmp_path, capsys, change, fragments):
    change(_long(sensor_frame(300, 4))).to_csv(tmp_path / "long.csv", index=False)
    bad_input(capsys, "train", tmp_path / "long.csv", "--out", tmp_path / "m", "--long", "Tag,Value", *TRAIN,
              names=fragments)


def test_long_columns_in_python(tmp_path):
    from mscred.detector import MSCRED

    wide = sensor_frame(300, 4)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", long_columns=("Tag", "Value")).fit(_long(wide))
    pd.testing.assert_frame_equal(model.detect(_long(wide)), model.detect(wide))   # (a wide frame read as such)
    with pytest.raises(ValueError, match="train.long_columns"):
        MSCRED(long_columns=("Tag", "Tag")).fit(wide)


def test_a_model_that_reads_plainly_saves_none_of_these_settings(tmp_path):
    """config.json holds the reading settings only where they are set (``ADDED_SETTINGS``): a model that does not
    use them is the file an mscred before them wrote and reads; loaded, they are their defaults."""
    import dataclasses

    from mscred.config import ADDED_SETTINGS, TrainConfig
    from mscred.detector import MSCRED

    frame = sensor_frame(300, 4)
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu").fit(frame).save(tmp_path / "plain")
    train = json.loads((tmp_path / "plain" / "config.json").read_text())["config"]["train"]
    assert set(train) == {f.name for f in dataclasses.fields(TrainConfig)} - set(ADDED_SETTINGS["train"])
    loaded = MSCRED.load(tmp_path / "plain").config_.train
    assert (loaded.time_column, loaded.na_values, loaded.long_columns) == ("timestamp", (), None)
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", na_values=["Bad"]).fit(frame).save(tmp_path / "set")
    train = json.loads((tmp_path / "set" / "config.json").read_text())["config"]["train"]
    assert train["na_values"] == ["Bad"] and "time_column" not in train
    assert MSCRED.load(tmp_path / "set").config_.train.na_values == ("Bad",)


def test_a_python_monitor_reads_chunks_as_the_model_reads_its_data():
    """model.monitor() fed a row at a time: a missing-value text is missing before the monitor looks for gaps (a
    chunk of one 'Bad' row once failed as a sensor with no value to interpolate from), as an empty cell is."""
    from mscred.detector import MSCRED

    frame = _with_states(300)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", missing="interpolate",
                   na_values=["Bad", "I/O Timeout"]).fit(frame)
    blank = frame.replace({"Bad": np.nan, " I/O Timeout ": np.nan}).astype({"s1": float, "s2": float, "s3": float})
    found = []
    for rows in (frame, blank):
        monitor = model.monitor()
        found.append(pd.concat([monitor.update(rows.iloc[i:i + 1]) for i in range(len(rows))], ignore_index=True))
    pd.testing.assert_frame_equal(found[0], found[1])


# ------------------------------------------------------------------------ widened against a pivot, on every kind
def _pivoted(df: pd.DataFrame) -> pd.DataFrame:
    """The wide table as a pandas pivot makes it (how reading.py made it until 2026-12-06; the reference here)."""
    from mscred.data.io import ROW_TIME
    from mscred.data.reading import _time_order

    sensors, times = df["Tag"].astype(str).str.strip(), df[TIMESTAMP]
    distinct = pd.unique(times.to_numpy())
    order = distinct[_time_order(distinct)]
    columns = list(pd.unique(sensors.to_numpy()))
    wide = (pd.DataFrame({"t": times.to_numpy(), "s": sensors.to_numpy(), "v": df["Value"].to_numpy()})
            .pivot(index="t", columns="s", values="v").reindex(index=order, columns=columns))
    return pd.DataFrame({TIMESTAMP: order, **{name: wide[name].to_numpy() for name in columns}},
                        index=pd.Index(order, name=ROW_TIME))


def _long_kinds() -> dict:
    rng = np.random.default_rng(0)
    t, s = np.repeat(np.arange(50), 4), np.tile([f"s{i}" for i in range(4)], 50)
    iso = pd.date_range("2026-01-01", periods=50, freq="min").strftime("%Y-%m-%d %H:%M:%S")

    def long(times, tags, values) -> pd.DataFrame:
        return pd.DataFrame({TIMESTAMP: times, "Tag": tags, "Value": values})

    return {
        "ints": long(t, s, np.arange(200)),
        "ints with gaps": long(t, s, np.arange(200)).drop(index=[3, 77]).reset_index(drop=True),
        "float32": long(t, s, rng.random(200).astype("float32")),
        "text values with states": long(t, s, np.where(rng.random(200) < .1, "Bad",
                                                       rng.random(200).round(3).astype(str))),
        "ISO text shuffled": long(np.repeat(iso, 4), s, rng.random(200)).sample(frac=1, random_state=1)
                                                                              .reset_index(drop=True),
        "day-first text": long(np.repeat(pd.date_range("2026-01-01", periods=50, freq="D").strftime("%d/%m/%Y"), 4),
                               s, rng.random(200)),
        "tz-aware times shuffled": long(np.repeat(pd.date_range("2026-01-01", periods=50, freq="min", tz="UTC"), 4),
                                        s, rng.random(200)).sample(frac=1, random_state=2).reset_index(drop=True),
        "naive times": long(np.repeat(pd.date_range("2026-01-01", periods=50, freq="min"), 4), s, rng.random(200)),
        "float times shuffled": long(t + 0.5, s, rng.random(200)).sample(frac=1, random_state=3)
                                                                  .reset_index(drop=True),
        "a missing time": long(np.where(np.arange(200) == 5, np.nan, t.astype(float)), s, rng.random(200)),
        "str dtype": long(pd.array(np.repeat(iso, 4), dtype="str"), pd.array(s, dtype="str"),
                          pd.array(rng.random(200).round(3).astype(str), dtype="str")),
        "categorical tags": long(t, pd.Categorical(s), rng.random(200)),
        "Float64 values": long(t, s, pd.array(rng.random(200), dtype="Float64")),
    }


@pytest.mark.parametrize("kind", list(_long_kinds()))
def test_widened_is_the_pivot_of_every_kind_of_long_table(kind):
    """The factorized ``widened`` (benchmarks/results/long_widen/) gives the frame a pivot gives: values, dtypes,
    times in order, the index of times; a repeat refused (the pivot would refuse it too)."""
    df = _long_kinds()[kind]
    pd.testing.assert_frame_equal(widened(df, "Tag", "Value", "x"), _pivoted(df), check_dtype=True,
                                  check_index_type=True)


def test_widened_refuses_a_repeat_as_the_pivot_cannot_take_it():
    df = pd.DataFrame({TIMESTAMP: [0, 0, 1, 0], "Tag": ["a", "b", "a", "b"], "Value": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(InputError, match="row 4: sensor 'b' at 0 a second time"):
        widened(df, "Tag", "Value", "x")
    with pytest.raises(ValueError):
        _pivoted(df)
