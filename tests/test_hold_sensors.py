"""Sensors held whatever the missing policy says of the others (``--hold NAME,...``, the ``train.hold_sensors``
setting kept in the model): a table of float tags and states or step tags takes ``--missing interpolate --hold
valve``, the states' gaps held at their last value (pandas' ``ffill().bfill()``), the float tags' interpolated as
without it; under ``--missing error`` the held sensors alone are filled. Through the time grid, a feed's seams,
``--context`` and a ``Monitor``'s chunks, as one table of the rows fills them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, main, run_cli, sensor_frame
from mscred.data.context import continued
from mscred.data.io import TIMESTAMP, float_read_options, table_from_frame
from mscred.data.reading import Reading
from mscred.detector import MSCRED
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")


def _read(frame: pd.DataFrame, missing: str, hold=("s1", "s3"), **reading) -> "Table":  # noqa: F821
    return table_from_frame(Reading(hold=tuple(hold), **reading).frame(frame, "t.csv"), "t.csv", missing=missing)


def _gappy(rows: int, seed: int, share: float = 0.3) -> pd.DataFrame:
    """Five sensors with ``share`` of their values missing at random (none missing throughout)."""
    rng = np.random.default_rng(seed)
    frame = sensor_frame(rows, 5, seed=seed)
    values = frame.iloc[:, 1:].to_numpy().copy()
    values[rng.random(values.shape) < share] = np.nan
    values[rng.integers(0, rows, 5), np.arange(5)] = rng.standard_normal(5)   # (a value in each column)
    frame.iloc[:, 1:] = values
    return frame


@pytest.mark.parametrize("rows", [1, 2, 17, 256, 1003])
@pytest.mark.parametrize("seed", [0, 1])
def test_held_sensors_are_pandas_ffill_the_others_as_their_policy(rows, seed):
    frame = _gappy(rows, seed)
    sensors = [f"s{j}" for j in range(5)]
    held = frame[["s1", "s3"]].ffill().bfill().to_numpy()
    for policy in ("interpolate", "hold"):
        table = _read(frame, policy)
        plain = table_from_frame(frame, "t.csv", missing=policy)   # (the policy for every sensor: its own tests)
        np.testing.assert_array_equal(table.values[:, [1, 3]], held)
        np.testing.assert_array_equal(table.values[:, [0, 2, 4]], plain.values[:, [0, 2, 4]])
        assert table.filled == plain.filled and table.held == ("s1", "s3")
        assert list(table.sensors) == sensors
    # under "error" the held sensors alone may miss values
    only_held = frame.assign(**{name: sensor_frame(rows, 5, seed=seed)[name] for name in ("s0", "s2", "s4")})
    table = _read(only_held, "error")
    np.testing.assert_array_equal(table.values[:, [1, 3]], held)
    np.testing.assert_array_equal(table.values[:, [0, 2, 4]], only_held[["s0", "s2", "s4"]].to_numpy())
    assert table.filled_by is None and set(table.filled) <= {"s1", "s3"}
    if np.isnan(frame[["s0", "s2", "s4"]].to_numpy()).any():
        with pytest.raises(InputError, match=r"t.csv: column 's[024]' row \d+: missing value"):
            _read(frame, "error")


def test_the_grid_holds_them_too():
    """A changes-only state beside a float tag on a 1-minute grid: the state held (pandas' resample().mean() then
    ffill), the float tag interpolated as without --hold."""
    rng = np.random.default_rng(4)
    times = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.sort(rng.choice(7200, 300, replace=False)), unit="s")
    frame = pd.DataFrame({TIMESTAMP: times.strftime("%Y-%m-%d %H:%M:%S"), "flow": rng.standard_normal(300),
                          "valve": np.where(rng.random(300) < 0.5, np.nan, rng.integers(0, 3, 300).astype(float))})
    table = _read(frame, "interpolate", hold=("valve",), resample="1min")
    indexed = frame.set_index(pd.DatetimeIndex(frame[TIMESTAMP]))[["flow", "valve"]]
    want = indexed.resample("1min", origin="epoch").mean()
    np.testing.assert_array_equal(table.values[:, 1], want["valve"].ffill().bfill().to_numpy())
    plain = table_from_frame(Reading(resample="1min").frame(frame, "t.csv"), "t.csv", missing="interpolate")
    np.testing.assert_array_equal(table.values[:, 0], plain.values[:, 0])
    # under "error" a period without a float value is still refused; the state's are held
    with pytest.raises(InputError, match="--resample 1min"):
        _read(frame, "error", hold=("valve",), resample="1min")
    steady = frame.assign(flow=1.0)
    table = _read(steady, "error", hold=("valve",), resample="10min")   # (every period has rows: flow present)
    assert table.filled_by is None and not np.isnan(table.values).any()
    with pytest.raises(InputError, match="a missing value of every sensor"):   # (a period without rows)
        _read(steady, "error", hold=("valve",), resample="10s")


def test_the_seam_holds_them_across_it():
    """A held sensor missing over the context's last rows and X's first: held at the last value before the seam,
    as the table of both rows holds it; a float tag's gap across it interpolated."""
    raw = sensor_frame(300, 5, seed=3)
    raw.iloc[180:215, 2] = np.nan   # s1, held
    raw.iloc[190:220, 1] = np.nan   # s0, interpolated
    context, table = _read(raw.iloc[:200], "interpolate"), _read(raw.iloc[200:], "interpolate")
    whole = _read(raw, "interpolate")
    for rows in (0, 5, 150, 200):
        np.testing.assert_allclose(continued(context, table, rows), whole.values[200 - rows:], rtol=0, atol=1e-12)
    assert not np.allclose(np.concatenate([context.values, table.values]), whole.values)
    assert (whole.values[180:215, 1] == whole.values[179, 1]).all()


def test_a_monitor_fills_them_as_the_whole_feed(tmp_path):
    """Under "error", a held sensor missing over a chunk's end, a whole chunk and the next's start: each chunk
    scored as the rows seen so far read as one table."""
    series = sensor_frame(900, 4, seed=5)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False,
                   hold_sensors=["s2"]).fit(series.iloc[:500])
    assert model.monitor().fills and model.monitor().missing == "error"
    feed = series.iloc[500:].reset_index(drop=True).copy()
    feed.loc[140:230, "s2"] = np.nan
    monitor = model.monitor()
    cuts = [0, 150, 200, 260, 380]
    for a, b in zip(cuts, cuts[1:]):
        got = monitor.update(feed.iloc[a:b])["score"].to_numpy()
        if b < model.min_rows:
            continue
        rows = model.context_rows(a, b - a)
        whole = _read(feed.iloc[:b], "error", hold=("s2",))
        want = model.detect(whole.last(rows + b - a))["score"].to_numpy()[rows:]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    with pytest.raises(InputError, match="column 's0'"):
        monitor.update(feed.iloc[380:].assign(s0=np.nan))   # (a sensor not held: refused under "error")


def _scores(path) -> pd.DataFrame:
    """A SCORES.csv, its text columns as text (a part of one without anomalies reads them as empty floats)."""
    return pd.read_csv(path, dtype={"root_causes": str, "scales": str}, keep_default_na=False, **float_read_options())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hold_sensors")
    frame = sensor_frame(500, 5, seed=1)
    frame["s4"] = np.round(frame["s4"])   # (a state: three values)
    frame.loc[100:140, "s4"] = np.nan
    frame.loc[300:310, "s0"] = np.nan
    frame.to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--missing", "interpolate",
                 "--hold", "s4", *TRAIN]) == 0
    return folder, folder / "model"


def test_train_keeps_them_and_says_which_were_held(trained, tmp_path, capsys):
    folder, model = trained
    assert json.loads((model / "config.json").read_text())["config"]["train"]["hold_sensors"] == ["s4"]
    code, out, err = run_cli(capsys, "info", model, "--json")
    assert code == 0, err
    assert json.loads(out)["reads_data_with"] == "--hold s4"
    code, _, err = run_cli(capsys, "train", folder / "train.csv", "--out", tmp_path / "m", "--missing",
                           "interpolate", "--hold", "s4", *TRAIN[:-1])
    assert code == 0, err
    assert "interpolated 11 missing value(s) in 1 sensor(s): s0 11; held the last value for 41 missing value(s) " \
           "in 1 sensor(s): s4 41" in err


def test_detect_scores_as_the_table_filled_beforehand(trained, tmp_path, capsys):
    """detect (the model's policy and --hold), a folder of two files cut in a held gap, and --context: the scores
    of the table filled beforehand sensor by sensor, bit for bit."""
    folder, model = trained
    today = sensor_frame(300, 5, seed=2)
    today["s4"] = np.round(today["s4"])
    today.loc[130:139, "s4"], today.loc[171:180, "s4"] = -1.0, 1.0   # (held, not the value after the gap)
    today.loc[140:170, "s4"] = np.nan
    today.loc[60:64, "s1"] = np.nan
    filled = today.copy()
    filled["s4"] = filled["s4"].ffill().bfill()
    filled["s1"] = filled["s1"].interpolate()
    today.to_csv(tmp_path / "today.csv", index=False)
    filled.to_csv(tmp_path / "filled.csv", index=False)
    (tmp_path / "feed").mkdir()
    today.iloc[:150].to_csv(tmp_path / "feed" / "a.csv", index=False)
    today.iloc[150:].to_csv(tmp_path / "feed" / "b.csv", index=False)
    runs = {"today": [tmp_path / "today.csv"], "filled": [tmp_path / "filled.csv"], "feed": [tmp_path / "feed"],
            "context": [tmp_path / "feed" / "b.csv", "--context", tmp_path / "feed" / "a.csv"]}
    got = {}
    for name, args in runs.items():
        assert main(["detect", str(model), *map(str, args), "--out", str(tmp_path / f"{name}_s.csv"),
                     *ON_THE_CPU]) == 0
        got[name] = _scores(tmp_path / f"{name}_s.csv")
    columns = ["timestamp", "score", "is_anomaly", "root_causes", "scales"]
    pd.testing.assert_frame_equal(got["today"][columns], got["filled"][columns])
    pd.testing.assert_frame_equal(got["feed"], got["today"])
    pd.testing.assert_frame_equal(got["context"], got["today"].iloc[150:].reset_index(drop=True))
    assert got["today"]["filled"].sum() == 36
    # under --missing error only the held sensor's gaps are filled: s1's refused at its cell
    capsys.readouterr()
    bad_input(capsys, "detect", model, tmp_path / "today.csv", "--out", tmp_path / "e.csv", "--missing", "error",
              *ON_THE_CPU, names=["column 's1' row 61: missing value"])
    states_only = today.assign(s1=filled["s1"])
    states_only.to_csv(tmp_path / "states_only.csv", index=False)
    (tmp_path / "feed2").mkdir()
    states_only.iloc[:150].to_csv(tmp_path / "feed2" / "a.csv", index=False)
    states_only.iloc[150:].to_csv(tmp_path / "feed2" / "b.csv", index=False)
    for name, data in (("one", "states_only.csv"), ("feed2", "feed2")):   # (a folder: the held gap across a seam)
        code, _, err = run_cli(capsys, "detect", model, tmp_path / data, "--out", tmp_path / f"e_{name}.csv",
                               "--missing", "error", *ON_THE_CPU)
        assert code == 0, err
    pd.testing.assert_frame_equal(_scores(tmp_path / "e_feed2.csv"),
                                  _scores(tmp_path / "e_one.csv"))
    pd.testing.assert_frame_equal(_scores(tmp_path / "e_feed2.csv")[columns],
                                  got["today"][columns])   # (s1 interpolated beforehand: the same values)


@pytest.mark.parametrize("settings, fragment", [
    ({"hold_sensors": ["a", "a"]}, "train.hold_sensors ('a', 'a'): must be a list of column names"),
    ({"hold_sensors": ["label"]}, "train.hold_sensors ('label',)"),
    ({"hold_sensors": ["a"], "drop_columns": ["a"]}, "train.hold_sensors and train.drop_columns both name 'a'"),
    ({"hold_sensors": ["a"], "only_sensors": ["b", "c", "d", "e"]}, "names 'a', which train.only_sensors does not"),
])
def test_bad_settings_are_refused(settings, fragment):
    with pytest.raises(InputError) as caught:
        MSCRED(**settings).resolved_config()
    assert fragment in str(caught.value)


def test_inspect_suggests_holding_the_states_beside_interpolation(tmp_path, capsys):
    frame = sensor_frame(400, 5, seed=7)
    frame["s4"] = np.round(frame["s4"])
    frame.loc[100:120, ["s0", "s4"]] = np.nan
    frame.to_csv(tmp_path / "t.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "t.csv", "--json")
    assert code == 0, err
    assert json.loads(out)["suggested_options"] == ["--missing interpolate", "--hold s4"]
    frame.loc[100:120, "s0"] = frame["s0"].iloc[99]
    frame.to_csv(tmp_path / "t.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "t.csv", "--json")
    assert json.loads(out)["suggested_options"] == ["--missing hold"]
