"""Text states read as numbers (``--states valve=CLOSED,OPEN``, the ``train.states`` setting kept in the model): a
historian's digital tag, each cell its state's position among those given, an empty cell or an ``--na-value`` text
missing, any other text refused at its cell. Through a wide table, a long one's values, every command reading the
model's data (detect, a folder feed, ``--context``, a ``Monitor``'s chunks), and ``inspect``'s suggestion."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, main, run_cli, scored_as_one_feed, sensor_frame
from mscred.data.io import TIMESTAMP, table_from_frame
from mscred.data.reading import Reading
from mscred.data.states import coded_states, parse_state_spec, state_columns, suggested_states
from mscred.detector import MSCRED
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")
STATES = ("CLOSED", "OPEN", "FAULT")


def _plant(rows: int, seed: int, missing: float = 0.0) -> tuple[pd.DataFrame, np.ndarray]:
    """(four float tags and a valve's state as text, the state's codes as the reference reads them: NaN where
    missing), ``missing`` of the valve's cells empty or 'Bad'."""
    rng = np.random.default_rng(seed)
    frame = sensor_frame(rows, 4, seed=seed)
    codes = (np.sin(np.arange(rows) / 17 + seed) > 0).astype(float)
    codes[rng.random(rows) < 0.05] = 2.0
    text = np.array(STATES, dtype=object)[codes.astype(int)]
    gone = rng.random(rows) < missing
    text[gone] = np.where(rng.random(gone.sum()) < 0.5, None, "Bad")
    codes[gone] = np.nan
    frame["valve"] = text
    return frame, codes


@pytest.mark.parametrize("rows", [1, 2, 37, 500])
@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_a_state_column_reads_as_the_states_positions(rows, missing):
    frame, codes = _plant(rows, seed=rows, missing=missing)
    frame["valve"] = [f"  {t} " if isinstance(t, str) and k % 3 == 0 else t for k, t in enumerate(frame["valve"])]
    read = Reading(na_values=("Bad",), states=("valve=CLOSED,OPEN,FAULT",)).frame(frame, "t.csv")
    np.testing.assert_array_equal(read["valve"].to_numpy(dtype=float), codes)
    pd.testing.assert_frame_equal(read.drop(columns="valve"), frame.drop(columns="valve"))
    if missing and np.isnan(codes).any():
        table = table_from_frame(Reading(na_values=("Bad",), hold=("valve",),
                                         states=("valve=CLOSED,OPEN,FAULT",)).frame(frame, "t.csv"), "t.csv")
        np.testing.assert_array_equal(table.values[:, 4], pd.Series(codes).ffill().bfill().to_numpy())


def test_another_text_is_refused_at_its_cell():
    frame, _ = _plant(50, seed=1)
    frame.loc[31, "valve"] = "HALF"
    with pytest.raises(InputError) as caught:
        coded_states(frame, ("valve=CLOSED,OPEN,FAULT",), "t.csv")
    assert str(caught.value) == ("t.csv: column 'valve' row 32 (timestamp 31): 'HALF' is none of its states "
                                 "(CLOSED, OPEN, FAULT: --states valve=CLOSED,OPEN,FAULT)")
    assert coded_states(frame, ("pump=OFF,ON",), "t.csv") is frame   # (a column not in the table: nothing to read)


@pytest.mark.parametrize("text, fragment", [
    ("valve", "give a column's name, '=', then its states in order"), ("=A,B", "give a column's name"),
    ("valve=A,,B", "a state is empty"), ("valve=A, B", "blanks about it"), ("valve=A,B,A", "state 'A' given twice"),
    ("timestamp=A,B", "the time column is read as such"), ("label=A", "the label column")])
def test_bad_specs_are_refused(text, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_state_spec(text)
    with pytest.raises(InputError, match="column 'v' given twice"):
        state_columns(["v=A", "v=B"])


def test_suggested_states_are_a_few_words():
    assert suggested_states(pd.Series(["ON", "OFF", None, "ON", " Bad"]), ("Bad",)) == ("OFF", "ON")
    assert suggested_states(pd.Series(["only"])) == ()
    assert suggested_states(pd.Series([f"id-{k}" for k in range(20)])) == ()
    assert suggested_states(pd.Series(["a,b", "c"])) == ()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("states")
    frame, _ = _plant(500, seed=0)
    frame.to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--states",
                 "valve=CLOSED,OPEN,FAULT", *TRAIN]) == 0
    return folder, folder / "model"


def test_the_model_keeps_them_and_scores_as_the_numbers_given(trained, tmp_path, capsys):
    """detect of the text table equals detect of the same rows with the codes written as numbers (a model trained
    on them alike: the same inputs), a folder of two files and --context equal to the one table; info names it."""
    folder, model = trained
    assert json.loads((model / "config.json").read_text())["config"]["train"]["states"] == \
        ["valve=CLOSED,OPEN,FAULT"]
    code, out, err = run_cli(capsys, "info", model, "--json")
    assert code == 0 and json.loads(out)["reads_data_with"] == "--states valve=CLOSED,OPEN,FAULT", err
    frame, codes = _plant(300, seed=3)
    scores = scored_as_one_feed(capsys, model, frame, 140, tmp_path)
    numbers = frame.assign(valve=codes)
    train, _ = _plant(500, seed=0)
    plain = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(
        train.assign(valve=_plant(500, seed=0)[1]))
    np.testing.assert_allclose(scores["score"], plain.detect(numbers)["score"], rtol=1e-6, atol=1e-9)
    # a Monitor reads its tail (codes by then) again with each chunk (text): as chunks of the codes given as numbers
    loaded = MSCRED.load(model, device="cpu")
    texts, given = loaded.monitor(), loaded.monitor()
    for a, b in ((0, 120), (120, 121), (121, 300)):
        pd.testing.assert_frame_equal(texts.update(frame.iloc[a:b]), given.update(numbers.iloc[a:b]))
    frame.loc[200, "valve"] = "HALF"
    frame.to_csv(tmp_path / "bad.csv", index=False)
    bad_input(capsys, "detect", model, tmp_path / "bad.csv", "--out", tmp_path / "bad_s.csv", *ON_THE_CPU,
              names=["bad.csv: column 'valve' row 201", "'HALF' is none of its states"])


def test_a_long_tables_states_and_inspects_suggestion(tmp_path, capsys):
    frame, codes = _plant(200, seed=5)
    frame[TIMESTAMP] = pd.date_range("2026-01-01", periods=200, freq="10s").strftime("%Y-%m-%d %H:%M:%S")
    long = frame.melt(id_vars=TIMESTAMP, var_name="Tag", value_name="Value")
    long.to_csv(tmp_path / "long.csv", index=False)
    frame.to_csv(tmp_path / "wide.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "wide.csv", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["state_columns"] == {"valve": ["CLOSED", "FAULT", "OPEN"]}
    assert found["suggested_options"][0] == "--states valve=CLOSED,FAULT,OPEN"
    bad_input(capsys, "train", tmp_path / "long.csv", "--long", "Tag,Value", "--out", tmp_path / "m", *TRAIN,
              names=["column 'valve'", "--states valve=CLOSED,FAULT,OPEN reads them as numbers"])
    code, out, err = run_cli(capsys, "inspect", tmp_path / "long.csv", "--long", "Tag,Value", "--states",
                             "valve=CLOSED,OPEN,FAULT", "--json")
    assert code == 0 and "valve" in json.loads(out)["sensors"], err
    wide = table_from_frame(Reading(long_columns=("Tag", "Value"), states=("valve=CLOSED,OPEN,FAULT",)).frame(
        pd.read_csv(tmp_path / "long.csv"), "long.csv"), "long.csv")
    np.testing.assert_array_equal(wide.values[:, wide.sensors.index("valve")], codes)


def test_settings_are_checked(tmp_path, capsys):
    for settings, fragment in (({"states": ["valve"]}, "train.states 'valve': give a column's name"),
                               ({"states": ["v=A"], "drop_columns": ["v"]}, "train.states and train.drop_columns"),
                               ({"states": ["v=A"], "only_sensors": ["a", "b", "c", "d"]}, "names 'v', which")):
        with pytest.raises(InputError, match=fragment):
            MSCRED(**settings).resolved_config()
    frame, _ = _plant(300, seed=0)
    frame.to_csv(tmp_path / "t.csv", index=False)
    code, _, err = run_cli(capsys, "train", tmp_path / "t.csv", "--out", tmp_path / "m", "--states", "valve", *TRAIN)
    assert code == 2 and "Invalid value for '--states': give a column's name" in err


def test_evaluate_reads_the_labels_states_as_the_model_does(trained, tmp_path, capsys):
    folder, model = trained
    frame, _ = _plant(300, seed=4)
    frame.to_csv(tmp_path / "today.csv", index=False)
    assert main(["detect", str(model), str(tmp_path / "today.csv"), "--out", str(tmp_path / "s.csv"),
                 *ON_THE_CPU]) == 0
    capsys.readouterr()
    frame.assign(label=(np.arange(300) > 200).astype(int)).to_csv(tmp_path / "labels.csv", index=False)
    for given in (["--model", model], ["--states", "valve=CLOSED,OPEN,FAULT"]):
        code, out, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "labels.csv",
                                 *given, "--json")
        assert code == 0, err
        assert json.loads(out)["n_anomalous_rows"] == 99
    bad_input(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "labels.csv",
              names=["column 'valve'", "--states valve=CLOSED,FAULT,OPEN reads them as numbers"])
