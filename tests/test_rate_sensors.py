"""Counters given to the model as their rate (``--rate NAME,...``, the ``train.rate_sensors`` setting kept in the
model): the increase since the row before per second of the rows' times (per row without times), a fall read as a
reset (a count from 0), the first row taking the second's rate. Against a float64 reference written with pandas, and
through every path that scores a table's rows: ``detect`` alone, ``--context``, a folder feed, a ``Monitor``'s
chunks and ``calibrate`` -- each equal to a model trained without ``--rate`` on the rates computed beforehand over
the whole series."""
from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, main, run_cli, scored_as_one_feed, sensor_frame
from mscred.data.io import TIMESTAMP, Table
from mscred.data.rate import rated, rates, step_seconds
from mscred.detector import MSCRED
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")


def _reference(values: np.ndarray, seconds) -> np.ndarray:
    """The rates by pandas, column by column: diff, a fall replaced by the value itself, over the steps' seconds
    (or 1), the first row backfilled from the second."""
    frame = pd.DataFrame(values)
    step = frame.diff()
    step = step.where(step.isna() | (step >= 0), frame)
    step = step.div(pd.Series(seconds, index=frame.index), axis=0) if seconds is not None else step
    return step.bfill().fillna(0.0).to_numpy() if len(frame) > 1 else np.zeros_like(values)


def _counters(rows: int, k: int, seed: int) -> np.ndarray:
    """k counters of random increments, each reset to a small value now and then."""
    rng = np.random.default_rng(seed)
    steps = rng.exponential(5.0, (rows, k))
    values = np.cumsum(steps, axis=0)
    for j in range(k):
        for at in np.sort(rng.choice(rows, size=min(3, rows), replace=False)[: rng.integers(0, 3)]):
            values[at:, j] -= values[at, j] - rng.uniform(0, 2)   # (counting again from about 0)
    return values


@pytest.mark.parametrize("rows", [1, 2, 3, 17, 1001])
@pytest.mark.parametrize("kind", ["datetime", "zoned", "duration", "rows", "ids"])
def test_rates_are_the_pandas_reference(rows, kind):
    rng = np.random.default_rng(rows)
    values = _counters(rows, 3, seed=rows)
    gaps = rng.choice([1.0, 1.0, 1.0, 2.0, 0.5, 15.0, 3600.0], rows)   # (uneven steps, a missing scrape)
    offsets = pd.to_timedelta(np.cumsum(gaps), unit="s")
    index = {"datetime": pd.DatetimeIndex(pd.Timestamp("2026-03-29 00:30") + offsets),
             "zoned": pd.DatetimeIndex(pd.Timestamp("2026-03-29 00:30", tz="Europe/Berlin") + offsets),
             "duration": pd.TimedeltaIndex(offsets), "rows": pd.RangeIndex(rows),
             "ids": pd.Index(np.arange(rows) * 7 + 3)}[kind]
    timed = kind in ("datetime", "zoned", "duration")
    assert (step_seconds(index) is not None) == timed
    want = _reference(values, np.concatenate([[1.0], gaps[1:]]) if timed else None)
    np.testing.assert_allclose(rates(values, index), want, rtol=1e-15, atol=0)
    if rows > 1:
        assert (rates(values, index) >= 0).all()   # (resets read as counts from 0, never a negative rate)


def test_rated_marks_the_table_and_takes_each_column_once():
    table = Table(values=_counters(50, 3, seed=1), sensors=["a", "b", "c"], index=pd.RangeIndex(50))
    once = rated(table, ["c", "a"])
    assert once.rated == ("c", "a")
    np.testing.assert_array_equal(once.values[:, 1], table.values[:, 1])
    np.testing.assert_array_equal(once.values[:, [0, 2]], rates(table.values[:, [0, 2]], table.index))
    assert rated(once, ["a", "c"]) is once and rated(table, ["z"]) is table


def test_step_seconds_read_times_as_the_order_check_does():
    text = pd.Index(["2026-01-01 00:00:00", "2026-01-01 00:00:10", "2026-01-01 00:01:10"])
    np.testing.assert_array_equal(step_seconds(text), [10.0, 60.0])
    zoned = pd.Index(["2026-10-25 02:30:00+02:00", "2026-10-25 02:10:00+01:00"])   # (the hour repeated: 40 min)
    np.testing.assert_array_equal(step_seconds(zoned), [2400.0])
    np.testing.assert_array_equal(step_seconds(pd.to_timedelta([1, 2.5], unit="s")), [1.5])
    for plain in (pd.Index([3, 5]), pd.Index(["3", "5"]), pd.Index(["run-a", "run-b"]), pd.RangeIndex(4)):
        assert step_seconds(plain) is None


def _fleet_series(rows: int, seed: int, start: str = "2026-01-01") -> pd.DataFrame:
    """Four float tags and two counters (bytes_total, energy) on a 10 s scrape with some scrapes missed."""
    rng = np.random.default_rng(seed)
    frame = sensor_frame(rows, 4, seed=seed)
    steps = np.where(rng.random(rows) < 0.05, 20, 10)
    frame[TIMESTAMP] = (pd.Timestamp(start) + pd.to_timedelta(np.cumsum(steps), unit="s")).strftime(
        "%Y-%m-%d %H:%M:%S")
    frame["bytes_total"] = np.cumsum(rng.exponential(1e6, rows) * (1 + 0.5 * np.sin(np.arange(rows) / 15)))
    frame["energy"] = np.cumsum(rng.uniform(0.5, 1.5, rows))
    frame.loc[rows // 2:, "energy"] -= frame["energy"].iloc[rows // 2] - 0.3   # (a meter reset)
    return frame


def _pre_rated(frame: pd.DataFrame) -> pd.DataFrame:
    """The counters' columns replaced by their reference rates over the frame's rows (per second)."""
    seconds = pd.to_datetime(frame[TIMESTAMP]).diff().dt.total_seconds().fillna(1.0).to_numpy()
    out = frame.copy()
    out[["bytes_total", "energy"]] = _reference(frame[["bytes_total", "energy"]].to_numpy(), seconds)
    return out


SETTINGS = dict(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False)


@pytest.fixture(scope="module")
def models():
    """(the model given --rate on the raw series, the model trained without it on the series rated beforehand):
    the same inputs, so the same weights, normalisation and threshold."""
    train = _fleet_series(600, seed=0)
    counted = MSCRED(rate_sensors=["bytes_total", "energy"], **SETTINGS).fit(train)
    plain = MSCRED(**SETTINGS).fit(_pre_rated(train))
    return counted, plain


def _scores(found: pd.DataFrame) -> np.ndarray:
    return found["score"].to_numpy()


def test_a_model_given_rates_scores_as_one_trained_on_them(models):
    counted, plain = models
    np.testing.assert_allclose(counted.normalizer_.min_, plain.normalizer_.min_, rtol=1e-12)
    np.testing.assert_allclose(counted.decision_scores_, plain.decision_scores_, rtol=1e-9, atol=1e-12)
    assert counted.threshold_ == pytest.approx(plain.threshold_, rel=1e-9)
    later = _fleet_series(400, seed=1, start="2026-02-01")
    later[["bytes_total", "energy"]] += 5e9   # (the raw counters far beyond the training range: their rates are not)
    np.testing.assert_allclose(_scores(counted.detect(later)), _scores(plain.detect(_pre_rated(later))),
                               rtol=1e-9, atol=1e-12)
    raw = MSCRED(**SETTINGS).fit(_fleet_series(600, seed=0))   # (without --rate every later row is out of range)
    assert raw.predict(later).mean() > counted.predict(later).mean()


def test_context_and_calibrate_rate_across_the_seam(models):
    counted, plain = models
    series = _fleet_series(500, seed=2, start="2026-02-01")
    whole = _pre_rated(series)   # (the rate of X's first row from the context's last)
    for cut in (60, 250, 420):
        got = counted.detect(series.iloc[cut:], context=series.iloc[:cut])
        want = plain.detect(whole.iloc[cut:], context=whole.iloc[:cut])
        np.testing.assert_allclose(_scores(got), _scores(want), rtol=1e-9, atol=1e-12)
    mine = copy.deepcopy(counted).calibrate(series, threshold="percentile")   # (calibrate changes the model)
    theirs = copy.deepcopy(plain).calibrate(whole, threshold="percentile")
    assert mine.threshold_ == pytest.approx(theirs.threshold_, rel=1e-9) and mine.threshold_ != counted.threshold_


@pytest.mark.parametrize("cuts", [[0, 40, 130, 131, 260, 500], [0, 100, 101, 102, 350, 500]])
def test_a_monitor_rates_each_chunk_after_the_rows_before(models, cuts):
    counted, plain = models
    series = _fleet_series(500, seed=3, start="2026-02-01")
    whole = _pre_rated(series)
    mine, theirs = counted.monitor(), plain.monitor()
    for a, b in zip(cuts, cuts[1:]):
        np.testing.assert_allclose(_scores(mine.update(series.iloc[a:b])), _scores(theirs.update(whole.iloc[a:b])),
                                   rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rate_sensors")
    _fleet_series(600, seed=0).to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--rate", "bytes_total",
                 "--rate", "energy", *TRAIN]) == 0
    return folder, folder / "model"


def test_the_cli_keeps_them_and_scores_a_feed_as_one_table(trained, tmp_path, capsys):
    folder, model = trained
    assert json.loads((model / "config.json").read_text())["config"]["train"]["rate_sensors"] == \
        ["bytes_total", "energy"]
    code, out, err = run_cli(capsys, "info", model, "--json")
    assert code == 0 and json.loads(out)["rate_sensors"] == ["bytes_total", "energy"], err
    code, out, err = run_cli(capsys, "info", model)
    assert "rates       bytes_total, energy: counters given to the network as their increase per second of the " \
        "rows' times" in out
    today = _fleet_series(400, seed=4, start="2026-02-01")
    scores = scored_as_one_feed(capsys, model, today, 170, tmp_path)
    loaded = MSCRED.load(model, device="cpu")
    np.testing.assert_allclose(scores["score"], _scores(loaded.detect(today)), rtol=1e-6)


def test_train_names_the_counters_left_raw_and_inspect_suggests_rate(tmp_path, capsys):
    _fleet_series(600, seed=0).to_csv(tmp_path / "t.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "t.csv", "--json")
    assert code == 0, err
    assert json.loads(out)["counters"] == ["bytes_total", "energy"]
    assert "--rate bytes_total,energy" in json.loads(out)["suggested_options"]
    code, _, err = run_cli(capsys, "train", tmp_path / "t.csv", "--out", tmp_path / "m", "--rate", "energy",
                           *TRAIN[:-1])
    assert code == 0, err
    assert "1 sensor(s) of" in err and "(bytes_total)" in err and "--rate energy,bytes_total" in err
    code, _, err = run_cli(capsys, "train", tmp_path / "t.csv", "--out", tmp_path / "m2", "--rate",
                           "energy,bytes_total", *TRAIN[:-1])
    assert code == 0 and "only rise" not in err, err


def test_a_rate_of_no_sensor_is_refused(tmp_path, capsys):
    _fleet_series(300, seed=0).to_csv(tmp_path / "t.csv", index=False)
    bad_input(capsys, "train", tmp_path / "t.csv", "--out", tmp_path / "m", "--rate", "bytes", *TRAIN,
              names=["t.csv", "--rate names 'bytes'", "not one of its sensors"])
    assert not (tmp_path / "m").exists()
    bad_input(capsys, "train", tmp_path / "t.csv", "--out", tmp_path / "m", "--rate", "energy", "--drop-columns",
              "energy", *TRAIN, names=["train.rate_sensors and train.drop_columns both name 'energy'"])


@pytest.mark.parametrize("settings, fragment", [
    ({"rate_sensors": ["a", "a"]}, "train.rate_sensors ('a', 'a'): must be a list of column names"),
    ({"rate_sensors": ["timestamp"]}, "train.rate_sensors ('timestamp',)"),
    ({"rate_sensors": ["a"], "only_sensors": ["b", "c", "d", "e"]}, "names 'a', which train.only_sensors does not"),
])
def test_bad_settings_are_refused(settings, fragment):
    with pytest.raises(InputError) as caught:
        MSCRED(**settings).resolved_config()
    assert fragment in str(caught.value)


def test_the_reports_worst_windows_rate_the_counters_by_the_scores_times(models):
    from mscred.report import worst_residuals

    counted, plain = models
    series = _fleet_series(300, seed=5, start="2026-02-01")
    whole = _pre_rated(series)
    sensors = list(counted.sensors_)
    scores = _scores(plain.detect(whole))
    times = series[TIMESTAMP].to_numpy()   # (a SCORES file's timestamps: text)
    mine = worst_residuals(counted, series[sensors].to_numpy(), sensors, scores, 2, times=times)
    theirs = worst_residuals(plain, whole[sensors].to_numpy(), sensors, scores, 2)
    assert [w for w, _, _ in mine] == [w for w, _, _ in theirs]
    for (_, _, a), (_, _, b) in zip(mine, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_the_model_keeps_how_it_took_the_rates(models, tmp_path, capsys):
    """A model whose rates were per second (timed rows) refuses rows without times -- an array, a .npy file -- whose
    rates could only be per row, another quantity; one whose rates were per row (rows numbered) keeps them per row
    whatever times the rows have; both kept by save and load."""
    counted, _ = models
    assert counted.rates_per_second is True
    later = _fleet_series(300, seed=6, start="2026-02-01")
    sensors = list(counted.sensors_)
    with pytest.raises(InputError, match="has no times, and the model's counters .--rate. are rates per second"):
        counted.detect(later[sensors].to_numpy())
    counted.save(tmp_path / "timed")
    assert MSCRED.load(tmp_path / "timed", device="cpu").rates_per_second is True
    np.save(tmp_path / "later.npy", later[sensors].to_numpy())
    bad_input(capsys, "detect", tmp_path / "timed", tmp_path / "later.npy", "--out", tmp_path / "s.csv", *ON_THE_CPU,
              names=["later.npy: has no times", "rates per second"])
    rows = _fleet_series(600, seed=0).assign(**{TIMESTAMP: np.arange(600)})   # (row numbers: rates per row)
    per_row = MSCRED(rate_sensors=["bytes_total", "energy"], **SETTINGS).fit(rows)
    assert per_row.rates_per_second is False
    per_row.save(tmp_path / "rows")
    loaded = MSCRED.load(tmp_path / "rows", device="cpu")
    assert loaded.rates_per_second is False
    np.testing.assert_array_equal(_scores(loaded.detect(later)), _scores(loaded.detect(later[sensors].to_numpy())))
