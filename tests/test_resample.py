"""`--resample PERIOD` (``mscred.data.resample``): unevenly spaced rows put on a regular time grid as they are read,
each period's row the mean of its rows, a period without a value missing. Checked against pandas' own resampling
(``DataFrame.resample(..., origin="epoch").mean()``, an independent float64 reference) on fresh random tables of
awkward sizes and periods, and through every command that reads a model's data: train (kept in the model), detect
(one grid over a folder's files and over --context), watch (a period held until a later one arrives: ``GridFeed``),
the Python ``Monitor``, evaluate."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, main, replace_waits, run_cli
from mscred.cli import watch as watch_module
from mscred.data.grid_feed import GridFeed
from mscred.data.io import KEEP, TIMESTAMP, float_read_options, load_table, table_from_frame
from mscred.data.reading import Reading
from mscred.data.resample import load_on_grid, parse_period
from mscred.detector import MSCRED
from mscred.errors import InputError

SENSORS = 4
TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")
START = pd.Timestamp("2026-03-01 08:00:00")


def _uneven(rows: int, seed: int, step_s: float = 7.0, missing: float = 0.0, labels: bool = False) -> pd.DataFrame:
    """``rows`` rows at random times (steps of 0.2 to 2 x ``step_s`` seconds, to the millisecond) as ISO text, sines
    of the time with noise; ``missing`` of the values NaN."""
    rng = np.random.default_rng(seed)
    seconds = np.cumsum(rng.uniform(0.2, 2.0, rows) * step_s).round(3)
    times = START + pd.to_timedelta(seconds, unit="s")
    values = np.sin(seconds[:, None] / (300 + 40 * np.arange(SENSORS))) + 0.05 * rng.standard_normal((rows, SENSORS))
    values[rng.random(values.shape) < missing] = np.nan
    frame = pd.DataFrame(values, columns=[f"s{j}" for j in range(SENSORS)])
    frame.insert(0, TIMESTAMP, times.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if labels:
        frame["label"] = (rng.random(rows) < 0.05).astype(np.int64)
    return frame


def _pandas_grid(frame: pd.DataFrame, period: str) -> pd.DataFrame:
    """The reference: pandas' resampling on the epoch-aligned grid, a period's mean (NaN where it has no value),
    a label's max (0 for a period without rows)."""
    indexed = frame.set_index(pd.to_datetime(frame[TIMESTAMP])).drop(columns=[TIMESTAMP])
    sensors = indexed.drop(columns=["label"], errors="ignore")
    out = sensors.resample(period, origin="epoch").mean()
    if "label" in indexed:
        out["label"] = indexed["label"].resample(period, origin="epoch").max().fillna(0).astype(np.int64)
    return out


def _on_grid(frame: pd.DataFrame, period: str, missing: str = KEEP, source: str = "t.csv"):
    return table_from_frame(Reading(resample=period).frame(frame, source), source, missing=missing)


@pytest.mark.parametrize("rows,period,seed,missing", [
    (1, "1min", 0, 0.0), (2, "7s", 1, 0.0), (97, "13s", 2, 0.1), (500, "1min", 3, 0.3), (1003, "90s", 4, 0.05),
    (777, "1h", 5, 0.0), (640, "2500ms", 6, 0.2)])
def test_the_grid_is_pandas_epoch_resampling_of_the_rows(rows, period, seed, missing):
    """Every period from the first row's to the last row's, its start as its time, the mean of its rows' values
    (missing ones skipped; NaN with none), a label 1 where any of its rows is -- pandas' resample(origin="epoch")
    to float64 rounding; the model's windows then span a fixed time."""
    frame = _uneven(rows, seed, missing=missing, labels=True)
    table = _on_grid(frame, period)
    want = _pandas_grid(frame, period)
    assert list(table.index) == list(want.index)
    assert table.index.name == TIMESTAMP
    np.testing.assert_allclose(table.values, want[table.sensors].to_numpy(), rtol=1e-14, atol=1e-15)
    assert np.array_equal(np.isnan(table.values), want[table.sensors].isna().to_numpy())
    assert list(table.labels) == list(want["label"])
    assert table.resampled == (rows, period)


@pytest.mark.parametrize("how", ["last", "first", "max", "min"])
@pytest.mark.parametrize("rows,period,seed", [(3, "1min", 7), (500, "13s", 8), (1003, "90s", 9)])
def test_a_period_of_other_aggregations_is_pandas_own(rows, period, seed, how):
    """``PERIOD,HOW``: a period's last, first, largest or smallest present value (NaN with none) -- pandas'
    ``resample(origin="epoch").last()`` (and first, max, min), which skip missing values too."""
    frame = _uneven(rows, seed, missing=0.3)
    table = _on_grid(frame, f"{period},{how}")
    indexed = frame.set_index(pd.to_datetime(frame[TIMESTAMP])).drop(columns=[TIMESTAMP])
    want = getattr(indexed.resample(period, origin="epoch"), how)()
    assert list(table.index) == list(want.index)
    np.testing.assert_array_equal(table.values, want[table.sensors].to_numpy())
    assert table.resampled == (rows, f"{period},{how}")


def test_an_aggregation_of_another_name_is_refused(tmp_path, capsys):
    with pytest.raises(InputError, match=r"--resample 1min,median: 'median' is no way to make a period's value; give "
                                         r"mean, last, first, max, min after the comma"):
        parse_period("1min,median")
    frame = _uneven(300, seed=10)
    frame.to_csv(tmp_path / "u.csv", index=False)
    code, _, err = run_cli(capsys, "train", tmp_path / "u.csv", "--out", tmp_path / "m", "--resample", "20s,last",
                           "--missing", "hold", *TRAIN)
    assert code == 0, err
    assert "rows resampled to" in err and "(--resample: each the last of its period's rows)" in err
    assert json.loads((tmp_path / "m" / "config.json").read_text())["config"]["train"]["resample"] == "20s,last"


def test_numbers_and_durations_and_zones_take_their_own_grid():
    """Times that are numbers take a number as the period, in their units (integer times on an integer grid, a
    float period on float times); durations a duration; date text with a UTC offset is put on the UTC grid, a time
    zone kept where the index had one."""
    values = np.arange(8.0)
    ints = pd.DataFrame({TIMESTAMP: [3, 4, 9, 10, 11, 20, 21, 27], "a": values})
    table = _on_grid(ints, "5")
    assert list(table.index) == [0, 5, 10, 15, 20, 25] and table.index.dtype.kind == "i"
    np.testing.assert_array_equal(table.values[:, 0], [0.5, 2, 3.5, np.nan, 5.5, 7])
    floats = ints.assign(**{TIMESTAMP: ints[TIMESTAMP] * 0.5})
    table = _on_grid(floats, "2.5")
    assert list(table.index) == [0.0, 2.5, 5.0, 7.5, 10.0, 12.5]
    np.testing.assert_array_equal(table.values[:, 0], [0.5, 2, 3.5, np.nan, 5.5, 7])
    durations = ints.assign(**{TIMESTAMP: pd.to_timedelta(ints[TIMESTAMP], unit="s")})
    table = _on_grid(durations, "5s")
    assert list(table.index) == list(pd.to_timedelta([0, 5, 10, 15, 20, 25], unit="s"))
    zoned = ints.assign(**{TIMESTAMP: [f"2026-03-01T10:00:{s:02d}+01:00" for s in ints[TIMESTAMP]]})
    table = _on_grid(zoned, "5s")
    assert table.index[0] == pd.Timestamp("2026-03-01 09:00:00", tz="UTC")
    np.testing.assert_array_equal(table.values[:, 0], [0.5, 2, 3.5, np.nan, 5.5, 7])
    local = ints.assign(**{TIMESTAMP: pd.date_range("2026-03-01", periods=8, freq="3s", tz="Europe/Paris")})
    table = table_from_frame(Reading(resample="6s").frame(local.set_index(TIMESTAMP), "p", strict=False), "p",
                             missing=KEEP)
    assert str(table.index.tz) == "Europe/Paris" and table.index[0] == local[TIMESTAMP][0]


def test_a_repeated_time_is_averaged_and_one_that_goes_back_refused():
    """Two rows of one time (a logger that wrote twice in a second) are in one period: averaged, not refused as
    they are without a grid; a time earlier than the row before is still refused, naming it."""
    frame = pd.DataFrame({TIMESTAMP: ["2026-03-01 00:00:01", "2026-03-01 00:00:01", "2026-03-01 00:00:12"],
                          "a": [1.0, 2.0, 4.0]})
    with pytest.raises(InputError, match="repeats the row before"):
        table_from_frame(frame, "t.csv")
    np.testing.assert_array_equal(_on_grid(frame, "10s").values[:, 0], [1.5, 4.0])
    back = frame.assign(**{TIMESTAMP: ["2026-03-01 00:00:01", "2026-03-01 00:00:00", "2026-03-01 00:00:12"]})
    with pytest.raises(InputError, match=r"row 2: timestamp '2026-03-01 00:00:00' is earlier than the row before's"):
        _on_grid(back, "10s")


def test_a_grid_read_again_is_the_same():
    """Resampling rows on the grid already gives them back (each period one row): a frame read twice, a Monitor's
    tail read again with a chunk, reads the same."""
    table = _on_grid(_uneven(400, 9, missing=0.2), "30s")
    frame = table.frame()
    frame.insert(0, TIMESTAMP, frame.index)
    again = _on_grid(frame.reset_index(drop=True), "30s")
    assert list(again.index) == list(table.index)
    np.testing.assert_array_equal(again.values, table.values)


def test_missing_periods_are_refused_by_name_or_filled_in_time():
    """A period without a row, and one where a sensor has no value, are missing values: --missing error names the
    first (its time, the rows about it), interpolate fills them linearly -- in time, as the grid is even."""
    frame = pd.DataFrame({TIMESTAMP: ["2026-03-01 00:00:05", "2026-03-01 00:00:50", "2026-03-01 00:03:10",
                                      "2026-03-01 00:03:20", "2026-03-01 00:04:00"],
                          "a": [1.0, 3.0, 10.0, 12.0, 4.0], "b": [1.0, 1.0, np.nan, np.nan, 2.0]})
    with pytest.raises(InputError, match=r"^t.csv: no row in the 1min from '2026-03-01 00:01:00' \(--resample 1min; "
                                         r"before row 3\): a missing value of every sensor; --missing interpolate"):
        _on_grid(frame, "1min", missing="error")
    short = frame.drop(index=[1])
    with pytest.raises(InputError, match=r"^t.csv: no row in the 1min from '2026-03-01 00:01:00'"):
        _on_grid(short, "1min", missing="error")
    dense = frame.iloc[2:].reset_index(drop=True)
    with pytest.raises(InputError, match=r"^t.csv: column 'b': no value in the 1min from '2026-03-01 00:03:00' "
                                         r"\(--resample 1min; rows 1-2 there, each missing it\)"):
        _on_grid(dense, "1min", missing="error")
    table = _on_grid(frame, "1min", missing="interpolate")
    np.testing.assert_allclose(table.values[:, 0], [2.0, 5.0, 8.0, 11.0, 4.0])
    np.testing.assert_allclose(table.values[:, 1], [1.0, 1.25, 1.5, 1.75, 2.0])
    assert table.filled == {"a": 2, "b": 3}
    assert table.gaps.sum() == 5


@pytest.mark.parametrize("period,times,fragment", [
    ("10", "dates", "the times are dates or durations; give the period as a duration, e.g. 10s or 10min"),
    ("1min", "numbers", "the times are numbers, not dates; give the period in their units"),
    ("1min", "none", "the table has no time column (name it 'timestamp', or give --time-column NAME)"),
    ("1ms", "dates", "rows would make 2,592,000,001 rows of 1ms"),
])
def test_a_period_that_does_not_fit_the_times_is_refused(period, times, fragment):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
    if times == "dates":
        frame.insert(0, TIMESTAMP, ["2026-03-01", "2026-03-02", "2026-03-31"])
    elif times == "numbers":
        frame.insert(0, TIMESTAMP, [1, 2, 3])
    with pytest.raises(InputError, match=rf"^t.csv: --resample {period}: .*{fragment.replace('(', '.').replace(')', '.')}"):
        _on_grid(frame, period)


@pytest.mark.parametrize("period,fragment", [
    ("0s", "the period must be more than 0"), ("-5s", "the period must be more than 0"),
    ("0", "the period must be more than 0"), ("1M", "not a duration"), ("soon", "not a duration"),
    ("nan", "the period must be more than 0")])
def test_train_refuses_a_bad_period_in_one_line(tmp_path, capsys, period, fragment):
    data = tmp_path / "d.csv"
    _uneven(300, 1).to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--resample", period, *TRAIN,
              names=["Invalid value for '--resample'", fragment])
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model trained with --resample 20s on an uneven table, and that table."""
    folder = tmp_path_factory.mktemp("resample")
    frame = _uneven(3000, seed=11, step_s=4.0)
    frame.to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--resample", "20s",
                 "--missing", "interpolate", *TRAIN]) == 0
    return folder


def test_the_model_keeps_its_period_and_detect_reads_on_its_grid(trained, tmp_path, capsys):
    """config.json holds train.resample; `info` says how the model reads data; detect of an uneven table scores
    one row a period (the rows before it said in a note), as the Python API's detect of the frame does."""
    config = json.loads((trained / "model" / "config.json").read_text())["config"]
    assert config["train"]["resample"] == "20s"
    code, out, _ = run_cli(capsys, "info", trained / "model")
    assert code == 0 and "reads data  as --resample 20s" in out
    test = _uneven(900, seed=12, step_s=4.0)
    test.to_csv(tmp_path / "test.csv", index=False)
    code, _, err = run_cli(capsys, "detect", trained / "model", tmp_path / "test.csv", "--out", tmp_path / "s.csv",
                           *ON_THE_CPU)
    assert code == 0, err
    grid = _pandas_grid(test, "20s")
    assert f"note: {tmp_path / 'test.csv'}: 900 rows resampled to {len(grid):,} rows of 20s" in err
    scores = pd.read_csv(tmp_path / "s.csv", **float_read_options())
    assert list(pd.to_datetime(scores[TIMESTAMP])) == list(grid.index)
    want = MSCRED.load(trained / "model", device="cpu").detect(test)
    np.testing.assert_allclose(scores["score"], want["score"], rtol=1e-12, atol=0)


def test_set_resample_is_the_option(tmp_path, capsys):
    frame = _uneven(1500, seed=2, step_s=4.0)
    frame.to_csv(tmp_path / "d.csv", index=False)
    for name, args in (("a", ["--resample", "30s"]), ("b", ["--set", "resample=30s"])):
        code, _, err = run_cli(capsys, "train", tmp_path / "d.csv", "--out", tmp_path / name, *args,
                               "--missing", "interpolate", *TRAIN)
        assert code == 0, err
    a = json.loads((tmp_path / "a" / "config.json").read_text())["config"]
    b = json.loads((tmp_path / "b" / "config.json").read_text())["config"]
    assert a == b and a["train"]["resample"] == "30s"


def test_a_folder_and_its_context_are_one_grid(trained, tmp_path, capsys):
    """A feed cut into files inside a period: the period's row is the mean over both files (not two rows of one
    time), and the files' rows are those of the table they were cut from; --context the same, its rows before the
    data's first period (a period over the seam scored as the data's)."""
    test = _uneven(2100, seed=13, step_s=4.0)
    feed = tmp_path / "feed"
    feed.mkdir()
    periods = pd.to_datetime(test[TIMESTAMP]).dt.floor("20s")
    seams = [next(i for i in range(near, len(test)) if periods[i] == periods[i - 1]) for near in (700, 1400)]
    for k, (a, b) in enumerate(zip([0, *seams], [*seams, len(test)])):
        test.iloc[a:b].to_csv(feed / f"part-{k}.csv", index=False)
    reading = Reading(resample="20s")
    parts = load_on_grid(sorted(feed.iterdir()), reading, "interpolate", ignore_label=True)
    whole = load_table_of(test, tmp_path, reading)
    assert sum(len(p.values) for p in parts) == len(whole.values)
    np.testing.assert_array_equal(np.concatenate([p.values for p in parts]), whole.values)
    assert list(parts[0].index.append([p.index for p in parts[1:]])) == list(whole.index)
    code, _, err = run_cli(capsys, "detect", trained / "model", feed, "--out", tmp_path / "f.csv", *ON_THE_CPU)
    assert code == 0, err
    assert list(pd.read_csv(tmp_path / "f.csv")[TIMESTAMP]) == [str(t) for t in whole.index]
    test.iloc[:seams[0]].to_csv(tmp_path / "before.csv", index=False)
    test.iloc[seams[0]:].to_csv(tmp_path / "after.csv", index=False)
    test.to_csv(tmp_path / "all.csv", index=False)
    for args, name in ((["all.csv"], "all"), (["after.csv", "--context", tmp_path / "before.csv"], "ctx")):
        code, _, err = run_cli(capsys, "detect", trained / "model", tmp_path / args[0], *args[1:],
                               "--out", tmp_path / f"scores-{name}.csv", *ON_THE_CPU)
        assert code == 0, err
    every, after = (pd.read_csv(tmp_path / f"scores-{name}.csv", **float_read_options()) for name in ("all", "ctx"))
    seam_period = periods[seams[0]]
    assert pd.Timestamp(after[TIMESTAMP][0]) == seam_period
    tail = every[pd.to_datetime(every[TIMESTAMP]) >= seam_period].reset_index(drop=True)
    assert len(tail) == len(after)
    # (the float32 network's other batches: up to 1e-7 relative, as for a split without --resample, feed.py)
    np.testing.assert_allclose(after["score"], tail["score"], rtol=1e-6, atol=0)


def load_table_of(frame: pd.DataFrame, folder, reading: Reading):
    frame.to_csv(folder / "whole.csv", index=False)
    return load_table(folder / "whole.csv", missing="interpolate", ignore_label=True, reading=reading)


class _Pieces:
    """A follower that gives ``frame``'s rows in pieces cut at ``cuts`` (a poll each), as a growing file does."""

    def __init__(self, frame: pd.DataFrame, cuts: list[int]):
        self.frame, self.cuts, self.path, self.notes = frame, [0, *cuts, len(frame)], "feed.csv", []

    def poll(self, final: bool = False):
        if len(self.cuts) < 2:
            return None
        a, b = self.cuts[0], self.cuts[1]
        self.cuts = self.cuts[1:]
        return self.frame.iloc[a:b].reset_index(drop=True)

    def where(self, skip: int = 0) -> str:
        return "feed.csv"

    def close(self) -> None:
        pass


@pytest.mark.parametrize("seed", range(6))
def test_any_cutting_of_a_feed_polls_the_whole_grid(seed):
    """A growing table read in random pieces (cut anywhere, inside periods, a piece inside one period): the grid
    rows polled, in order, are the grid of the whole table (values and missing ones), each period once."""
    rng = np.random.default_rng(seed)
    frame = _uneven(int(rng.integers(50, 400)), seed, step_s=3.0, missing=0.1)
    cuts = sorted(set(rng.integers(1, len(frame), int(rng.integers(1, 12))).tolist()))
    feed = GridFeed(_Pieces(frame, cuts), "17s")
    polled = [feed.poll() for _ in range(len(cuts) + 1)] + [feed.poll(final=True)]
    got = pd.concat([p for p in polled if p is not None], ignore_index=True)
    whole = _on_grid(frame, "17s")
    assert list(got[TIMESTAMP]) == list(whole.index)
    np.testing.assert_array_equal(got[whole.sensors].to_numpy(), whole.values)


def test_a_monitor_takes_chunks_of_whole_periods_and_keeps_the_grid_even():
    """Monitor.update of raw chunks (a model that resamples): each chunk put on the grid on from the last period
    seen, periods without rows between two chunks made rows of missing values (filled, at interpolate), so the
    chunks' rows are the whole table's; a period split between two chunks comes twice and is refused."""
    frame = _uneven(2400, seed=21, step_s=4.0)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, resample="20s",
                   missing="interpolate").fit(frame)
    test = _uneven(900, seed=22, step_s=4.0)
    periods = pd.to_datetime(test[TIMESTAMP]).dt.floor("20s")
    first_of = [int(np.flatnonzero(periods == periods[i])[0]) for i in (300, 600)]
    gap = test.drop(index=range(first_of[0], first_of[0] + 40)).reset_index(drop=True)   # (~8 empty periods)
    cut = first_of[0]
    monitor = model.monitor()
    got = pd.concat([monitor.update(gap.iloc[:cut]), monitor.update(gap.iloc[cut:])], ignore_index=True)
    whole = _on_grid(gap, "20s")
    assert list(pd.to_datetime(got[TIMESTAMP])) == list(whole.index)
    split = model.monitor()
    split.update(test.iloc[:first_of[1] + 1])
    with pytest.raises(InputError, match="does not follow the feed's last"):
        split.update(test.iloc[first_of[1] + 1:])


@pytest.mark.parametrize("policy", ["interpolate", "hold"])
def test_a_monitors_chunks_score_as_the_whole_grid(policy):
    """Two chunks with ~8 empty periods between them (made rows of missing values on the grid, filled from the
    rows before as the whole grid fills them): the second chunk's scores are detect's of the whole grid's rows, its
    context taken from the grid before it."""
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, resample="20s",
                   missing=policy).fit(_uneven(2400, seed=23, step_s=4.0))
    test = _uneven(900, seed=24, step_s=4.0)
    periods = pd.to_datetime(test[TIMESTAMP]).dt.floor("20s")
    cut = int(np.flatnonzero(periods == periods[400])[0])
    gap = test.drop(index=range(cut, cut + 40)).reset_index(drop=True)
    monitor = model.monitor()
    monitor.update(gap.iloc[:cut])
    got = monitor.update(gap.iloc[cut:])["score"].to_numpy()
    whole = _on_grid(gap, "20s", missing=policy)
    before = int((whole.index < pd.to_datetime(gap[TIMESTAMP][cut - 1]).floor("20s")).sum()) + 1
    rows = model.context_rows(before, len(whole.values) - before)
    want = model.detect(whole.last(rows + len(whole.values) - before))["score"].to_numpy()[rows:]
    assert len(got) == len(want) and got.any()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_watch_holds_a_period_until_a_later_one_comes(trained, tmp_path, capsys, monkeypatch):
    """watch of a growing uneven CSV: each look scores the periods before the last row's, the last period waiting
    for a row of a later one; SCORES.csv is what a Monitor gives for the grid rows in those chunks. Ctrl-C leaves
    the last period unscored, said in a note; --resume at --idle-exit then scores the rest."""
    test = _uneven(900, seed=31, step_s=4.0)
    cuts = [200, 201, 230, 700, len(test)]
    data, out = tmp_path / "live.csv", tmp_path / "scores.csv"
    test.iloc[:cuts[0]].to_csv(data, index=False)

    def append(a, b):
        return lambda: test.iloc[a:b].to_csv(data, mode="a", header=False, index=False)

    replace_waits(monkeypatch, watch_module, *[append(a, b) for a, b in zip(cuts, cuts[1:])])
    code, _, err = run_cli(capsys, "watch", trained / "model", data, "--out", out, "--interval", "0.01",
                           *ON_THE_CPU)
    assert code == 0, err
    whole = _on_grid(test, "20s", missing="interpolate")
    last = test[TIMESTAMP][int(np.flatnonzero(pd.to_datetime(test[TIMESTAMP]).dt.floor("20s")
                                              == whole.index[-1])[0])]
    assert err.splitlines()[-1].startswith(f"note: {data}: the last ") and f"(from '{last}') not scored" in err
    grid = whole.frame()
    grid.insert(0, TIMESTAMP, grid.index)
    grid = grid.reset_index(drop=True)
    ends = [0] + [int(np.searchsorted(whole.index, pd.Timestamp(test[TIMESTAMP][c - 1]).floor("20s"))) for c in cuts]
    monitor = MSCRED.load(trained / "model", device="cpu").monitor()
    want = pd.concat([monitor.update(grid.iloc[a:b]) for a, b in zip(ends, ends[1:]) if b > a], ignore_index=True)
    got = pd.read_csv(out, **float_read_options())
    assert len(got) == len(whole.values) - 1
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-12, atol=0)
    code, _, err = run_cli(capsys, "watch", trained / "model", data, "--out", out, "--idle-exit", "0", "--resume",
                           *ON_THE_CPU)
    assert code == 0, err
    assert list(pd.read_csv(out)[TIMESTAMP]) == [str(t) for t in whole.index]


def test_evaluate_puts_the_labels_on_the_scores_grid(trained, tmp_path, capsys):
    """Scores of a resampling model have a row a period: evaluate says to give it the same --resample, and with it
    reads the labels (alone, or beside sensor values) on that grid, a period anomalous where any row is."""
    test = _uneven(900, seed=41, step_s=4.0, labels=True)
    test.to_csv(tmp_path / "test.csv", index=False)
    test[[TIMESTAMP, "label"]].to_csv(tmp_path / "labels.csv", index=False)
    code, _, err = run_cli(capsys, "detect", trained / "model", tmp_path / "test.csv", "--out", tmp_path / "s.csv",
                           *ON_THE_CPU)
    assert code == 0, err
    bad_input(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "test.csv",
              names=["has 900 rows but", "give evaluate the same --resample"])
    grid = _pandas_grid(test, "20s")
    for labels in ("test.csv", "labels.csv"):
        code, out, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / labels,
                                 "--resample", "20s", "--json")
        assert code == 0, err
        summary = json.loads(out)
        assert (summary["n_rows"], summary["n_anomalous_rows"]) == (len(grid), int(grid["label"].sum()))
    code, out, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "test.csv", "--model",
                             trained / "model", "--json")   # (the model's grid)
    assert code == 0, err
    assert json.loads(out)["n_rows"] == len(grid)


def test_reports_and_untimed_rows_of_a_resampling_model(trained, tmp_path, capsys):
    """detect --report and evaluate --model --report of a resampling model draw the grid rows (the worst windows'
    residuals read back from them); rows without times given to the model in Python (an array, a frame without a
    time column) are taken as on the grid already, as the report's own reading of them is."""
    pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (the report extra)")
    test = _uneven(900, seed=51, step_s=4.0, labels=True)
    test.to_csv(tmp_path / "test.csv", index=False)
    code, _, err = run_cli(capsys, "detect", trained / "model", tmp_path / "test.csv", "--out", tmp_path / "s.csv",
                           "--report", tmp_path / "page", *ON_THE_CPU)
    assert code == 0, err
    assert (tmp_path / "page" / "index.html").is_file()
    code, _, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "test.csv", "--model",
                           trained / "model", "--report", tmp_path / "eval")
    assert code == 0, err
    assert "Residual signature matrices" in (tmp_path / "eval" / "index.html").read_text()
    model = MSCRED.load(trained / "model", device="cpu")
    grid = _on_grid(test.drop(columns=["label"]), "20s", missing="interpolate")
    by_time = model.detect(test)
    as_rows = model.detect(grid.values)
    np.testing.assert_allclose(as_rows["score"], by_time["score"], rtol=1e-12, atol=0)


def test_train_names_resample_where_the_rows_are_uneven(tmp_path, capsys):
    """train of rows whose steps vary widely says so and names --resample (not of even rows, nor once resampled);
    durations in the notes read as durations (`1.2 s`, `3 h 1 min`)."""
    uneven = _uneven(1500, seed=61, step_s=4.0)
    uneven["timestamp"] = (START + pd.to_timedelta(np.cumsum(np.random.default_rng(1).choice([1.0, 1.0, 30.0], 1500)),
                                                   unit="s")).strftime("%Y-%m-%d %H:%M:%S")
    even = uneven.assign(timestamp=pd.date_range(START, periods=1500, freq="4s").strftime("%Y-%m-%d %H:%M:%S"))
    for name, frame, args, said in (("u", uneven, [], True), ("e", even, [], False),
                                    ("r", uneven, ["--resample", "30s", "--missing", "interpolate"], False)):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        code, _, err = run_cli(capsys, "train", tmp_path / f"{name}.csv", "--out", tmp_path / f"m{name}", *args,
                               *TRAIN)
        assert code == 0, err
        note = (f"note: {tmp_path / f'{name}.csv'}: the rows are not evenly spaced in time (a tenth of the steps "
                "under 1 s, a tenth over 30 s; the median 1 s)")
        assert (note in err) == said, err


def test_a_long_changes_only_export_followed_on_a_grid(tmp_path, capsys, monkeypatch):
    """A historian's long export where each tag has times of its own (changes only): trained with --long and
    --resample, watched as it grows (the last time's lines held by the long feed, the last period's rows by the
    grid), then --resume at --idle-exit: the periods are those detect finds in the whole file, each once."""
    rng = np.random.default_rng(71)
    pieces = []
    for k, tag in enumerate(["FIC101", "TI202", "PI303", "LI404"]):
        seconds = np.cumsum(rng.uniform(2.0, 40.0, 500)).round(0)
        pieces.append(pd.DataFrame({"Time": (START + pd.to_timedelta(seconds, unit="s")).strftime("%Y-%m-%d %H:%M:%S"),
                                    "Tag": tag, "Value": np.sin(seconds / (400 + 90 * k)) + 0.02 * k}))
    lines = pd.concat(pieces).sort_values("Time", kind="stable").reset_index(drop=True)
    end = min(piece["Time"].iloc[-1] for piece in pieces)   # (every tag to the end: a train file)
    lines = lines[lines["Time"] <= end].drop_duplicates(["Time", "Tag"]).reset_index(drop=True)
    lines.to_csv(tmp_path / "train.csv", index=False)
    code, _, err = run_cli(capsys, "train", tmp_path / "train.csv", "--out", tmp_path / "model", "--long", "Tag,Value",
                           "--time-column", "Time", "--resample", "1min", "--missing", "interpolate", *TRAIN)
    assert code == 0, err
    code, _, err = run_cli(capsys, "detect", tmp_path / "model", tmp_path / "train.csv", "--out", tmp_path / "d.csv",
                           *ON_THE_CPU)
    assert code == 0, err
    periods = list(pd.read_csv(tmp_path / "d.csv")[TIMESTAMP])
    data, out = tmp_path / "live.csv", tmp_path / "w.csv"
    cuts = [300, 301, 777, 1200]
    lines.iloc[:cuts[0]].to_csv(data, index=False)
    replace_waits(monkeypatch, watch_module, *[
        (lambda a, b: lambda: lines.iloc[a:b].to_csv(data, mode="a", header=False, index=False))(a, b)
        for a, b in zip(cuts, cuts[1:])])
    code, _, err = run_cli(capsys, "watch", tmp_path / "model", data, "--out", out, "--interval", "0.01",
                           *ON_THE_CPU)
    assert code == 0, err
    assert "not scored: no row of a later 1min came" in err
    watched = list(pd.read_csv(out)[TIMESTAMP])
    assert watched == periods[:len(watched)] and len(watched) < len(periods)
    lines.iloc[cuts[-1]:].to_csv(data, mode="a", header=False, index=False)
    code, _, err = run_cli(capsys, "watch", tmp_path / "model", data, "--out", out, "--idle-exit", "0", "--resume",
                           *ON_THE_CPU)
    assert code == 0, err
    assert list(pd.read_csv(out)[TIMESTAMP]) == periods


@pytest.mark.parametrize("zone, start", [("Europe/Berlin", "2026-10-21 05:00"), ("Europe/Berlin", "2026-03-26 22:00"),
                                         ("Australia/Sydney", "2026-04-01 12:00"), ("Asia/Kolkata", "2026-01-01 03:00"),
                                         ("America/Santiago", "2026-09-03 17:00")])
def test_whole_days_are_the_zones_days(zone, start):
    """--resample 1D of wall times read in a zone (--time-zone): each day from local midnight, 23 or 25 hours long
    where the clocks change (Santiago's change skips a midnight: its day begins at 01:00) -- pandas' resampling of
    the zoned rows -- through the grid of the table and a feed polled in random pieces; 2D the same days in pairs,
    counted from 1970-01-01's local midnight; 6h keeps the epoch's even grid."""
    rng = np.random.default_rng(len(zone) + len(start))
    instants = pd.Timestamp(start, tz=zone) + pd.to_timedelta(np.cumsum(rng.uniform(60, 1500, 1500)), unit="s")
    frame = pd.DataFrame(rng.standard_normal((len(instants), SENSORS)), columns=[f"s{j}" for j in range(SENSORS)])
    frame.insert(0, TIMESTAMP, instants.strftime("%Y-%m-%d %H:%M:%S%z"))   # (with their offsets: no fold to guess)
    reading = Reading(resample="1D", time_zone=zone)
    table = table_from_frame(reading.frame(frame, "t.csv"), "t.csv", missing=KEEP)
    want = frame.drop(columns=TIMESTAMP).set_index(instants.as_unit("ns")).resample("1D").mean()
    assert list(table.index) == list(want.index) and str(table.index.tz) == zone
    np.testing.assert_allclose(table.values, want.to_numpy(), rtol=1e-12, atol=1e-15)
    assert all(t.tz_localize(None) == t.tz_localize(None).normalize() or t.hour == 1 for t in table.index)
    read = reading.frame(frame, "t.csv")   # (what a feed's follower gives: zoned times)
    cuts = sorted(set(rng.integers(1, len(frame), 6).tolist()))
    feed = GridFeed(_Pieces(read, cuts), "1D")
    polled = [feed.poll() for _ in range(len(cuts) + 1)] + [feed.poll(final=True)]
    got = pd.concat([p for p in polled if p is not None], ignore_index=True)
    assert list(got[TIMESTAMP]) == list(table.index)
    np.testing.assert_allclose(got[table.sensors].to_numpy(), table.values, rtol=1e-12, atol=1e-15)
    pairs = table_from_frame(Reading(resample="2D", time_zone=zone).frame(frame, "t.csv"), "t.csv", missing=KEEP)
    days = (pairs.index.tz_localize(None).normalize() - pd.Timestamp("1970-01-01")).days
    assert (days % 2 == 0).all() and np.diff(days).tolist() == [2] * (len(days) - 1)
    even = table_from_frame(Reading(resample="6h", time_zone=zone).frame(frame, "t.csv"), "t.csv", missing=KEEP)
    assert (np.diff(even.index.asi8) == 6 * 3600 * 10 ** 9).all() and even.index[0].value % (6 * 3600 * 10 ** 9) == 0


def test_a_monitor_runs_on_the_zones_days_across_a_missing_day():
    """A model on whole days of a zone (1D, Europe/Berlin): a Monitor's chunks cut at local midnights, the day after
    the clocks go back (2026-10-26) missing between them, give the grid of the whole table (the missing day a row of
    missing values, filled), each day from its local midnight."""
    rng = np.random.default_rng(7)
    instants = pd.Timestamp("2026-09-01", tz="Europe/Berlin") + pd.to_timedelta(
        np.cumsum(rng.uniform(600, 2400, 6000)), unit="s")
    values = np.sin(np.arange(len(instants))[:, None] / (40 + np.arange(SENSORS)))
    frame = pd.DataFrame(values + 0.1 * rng.standard_normal(values.shape), columns=[f"s{j}" for j in range(SENSORS)])
    frame.insert(0, TIMESTAMP, instants.strftime("%Y-%m-%d %H:%M:%S%z"))
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, windows=(2, 4), gap=1, steps=2,
                   scales=(2,), resample="1D", time_zone="Europe/Berlin", missing="interpolate").fit(frame)
    later = frame.assign(**{TIMESTAMP: (instants + pd.Timedelta(days=52)).strftime("%Y-%m-%d %H:%M:%S%z")})
    days = (instants + pd.Timedelta(days=52)).normalize()
    first_of = {day: int(np.flatnonzero(days == day)[0]) for day in days.unique()}
    gone = pd.Timestamp("2026-10-26", tz="Europe/Berlin")
    cut, resume = first_of[gone], first_of[gone + pd.Timedelta(days=1)]
    monitor = model.monitor()
    got = pd.concat([monitor.update(later.iloc[:cut]), monitor.update(later.iloc[resume:])], ignore_index=True)
    whole = table_from_frame(Reading(resample="1D", time_zone="Europe/Berlin").frame(
        later.drop(index=range(cut, resume)), "t.csv"), "t.csv", missing=KEEP)
    assert list(pd.to_datetime(got[TIMESTAMP])) == list(whole.index)
    assert all(t == t.normalize() for t in whole.index) and gone in list(whole.index)
