"""Local times read in a time zone (``--time-zone``, the ``train.time_zone`` setting kept in the model;
``mscred.data.time_zone``): wall times written without an offset become the instants they name, the hour the
clocks go back (which comes twice) told apart by order -- checked against the true instants on fresh random series
in zones of both hemispheres, wide and long tables, cut into a feed's pieces anywhere -- and every command reading
the model's data reads them so, scoring as the same instants written with their offsets."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, main, replace_waits, run_cli, sensor_frame
from mscred.cli import watch as watch_module
from mscred.data.io import TIMESTAMP, float_read_options, table_from_frame
from mscred.data.reading import Reading
from mscred.data.time_zone import ZoneClock, localized
from mscred.detector import MSCRED
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")
# (zone, a UTC instant a little before a change of its clocks): the autumn change north and south of the equator,
# a spring change, a zone without summer time, UTC
CHANGES = [("Europe/Berlin", "2026-10-24 22:00"), ("America/Chicago", "2026-11-01 04:30"),
           ("Australia/Sydney", "2026-04-04 13:00"), ("Europe/London", "2026-03-29 00:00"),
           ("Asia/Kolkata", "2026-10-24 22:00"), ("UTC", "2026-10-24 22:00")]
WALL = "%Y-%m-%d %H:%M:%S"


def _true_times(zone: str, start: str, rows: int, step_s: int) -> pd.DatetimeIndex:
    """``rows`` instants ``step_s`` apart from ``start`` (UTC), in ``zone``."""
    return pd.date_range(pd.Timestamp(start, tz="UTC"), periods=rows, freq=f"{step_s}s").tz_convert(zone)


def _wall(times: pd.DatetimeIndex) -> pd.Index:
    """The wall-clock text a historian writes for ``times``: local, no offset."""
    return pd.Index(times.tz_localize(None).strftime(WALL))


@pytest.mark.parametrize("zone, start", CHANGES)
@pytest.mark.parametrize("seed", [0, 1])
def test_wall_times_become_the_instants_they_name(zone, start, seed):
    """Regular series of any step up to an hour (each pass of a repeated hour then holds a row), starting at
    random before the change (a series that starts in the second pass reads as the first: nothing tells them apart)
    and running through it, or not: the instants read back exactly, as text and as naive date-times."""
    rng = np.random.default_rng(seed)
    for _ in range(8):
        step = int(rng.choice([1, 7, 60, 599, 600, 1800, 3599, 3600]))
        rows = int(rng.integers(1, 400))
        first = pd.Timestamp(start) + pd.Timedelta(seconds=int(rng.integers(0, 5400)))
        truth = _true_times(zone, str(first), rows, step)
        for times in (_wall(truth), pd.DatetimeIndex(truth.tz_localize(None))):
            frame = pd.DataFrame({TIMESTAMP: times, "a": np.arange(rows, dtype=float)})
            got = pd.DatetimeIndex(Reading(time_zone=zone).frame(frame, "t.csv")[TIMESTAMP])
            assert got.equals(truth.as_unit("ns")), (zone, step, rows, first)
            assert str(got.tz) == zone


@pytest.mark.parametrize("zone, start", CHANGES[:3])
def test_a_long_tables_lines_are_told_apart_by_their_sensors(zone, start):
    """A long table: several lines a time (some sensors absent at some times), hourly and every 10 minutes; the
    repeated hour's lines repeat a sensor's time, not the time alone."""
    rng = np.random.default_rng(3)
    for step in (600, 3600):
        truth = _true_times(zone, start, 40, step)
        lines = [(t, tag) for t in truth for tag in ("s0", "s1", "s2") if rng.random() > 0.2 or tag == "s0"]
        long = pd.DataFrame({"Time": _wall(pd.DatetimeIndex([t for t, _ in lines])), "Tag": [g for _, g in lines],
                             "Value": rng.standard_normal(len(lines))})
        wide = Reading("Time", long_columns=("Tag", "Value"), time_zone=zone).frame(long, "long.csv")
        assert pd.DatetimeIndex(wide[TIMESTAMP]).equals(truth.as_unit("ns"))
        # the values where they were: a line's value in its time's row
        want = pd.DataFrame({"t": [t for t, _ in lines], "tag": [g for _, g in lines], "v": long["Value"]})
        for t, tag, v in want.sample(10, random_state=0).itertuples(index=False):
            assert wide.loc[pd.DatetimeIndex(wide[TIMESTAMP]) == t, tag].item() == v


@pytest.mark.parametrize("zone, start", CHANGES[:3])
def test_a_feed_cut_anywhere_reads_as_the_whole(zone, start):
    """A followed feed's pieces, cut at every row through the repeated hour, read with one clock: the second pass's
    first rows in a piece of their own are told apart from the pieces before."""
    truth = _true_times(zone, start, 60, 600)
    frame = pd.DataFrame({TIMESTAMP: _wall(truth), "a": 1.0})
    for cut in range(1, len(frame)):
        reading = Reading(time_zone=zone).followed()
        pieces = [reading.frame(frame.iloc[:cut], "feed"), reading.frame(frame.iloc[cut:], "feed")]
        got = pd.DatetimeIndex(pd.concat(pieces)[TIMESTAMP])
        assert got.equals(truth.as_unit("ns")), cut
    # without the clock a piece starting in the second pass reads as the first (out of order at the seam)
    assert Reading(time_zone=zone).followed().clock is not None
    assert Reading().followed().clock is None


def test_one_row_in_the_repeated_hour_is_its_first_pass():
    """Nothing tells which pass a lone row of the repeated hour is (an uneven export's): the first, as Python's
    fold=0; the rows stay in order either way."""
    frame = pd.DataFrame({TIMESTAMP: ["2026-10-25 01:50", "2026-10-25 02:30", "2026-10-25 04:00"], "a": 1.0})
    got = Reading(time_zone="Europe/Berlin").frame(frame, "t.csv")[TIMESTAMP]
    assert [str(t) for t in got] == ["2026-10-25 01:50:00+02:00", "2026-10-25 02:30:00+02:00",
                                     "2026-10-25 04:00:00+01:00"]


def test_times_with_an_offset_are_shown_in_the_zone_and_a_clock_reads_on():
    frame = pd.DataFrame({TIMESTAMP: ["2026-10-25 00:50:00+00:00", "2026-10-25 01:10:00Z"], "a": 1.0})
    got = Reading(time_zone="Europe/Berlin").frame(frame, "t.csv")[TIMESTAMP]
    assert [str(t) for t in got] == ["2026-10-25 02:50:00+02:00", "2026-10-25 02:10:00+01:00"]
    clock = ZoneClock()
    clock.set_after(pd.DatetimeIndex(got))
    assert clock.last == pd.Timestamp("2026-10-25 01:10", tz="UTC").value
    # a Python caller's frame indexed by its naive times
    indexed = pd.DataFrame({"a": [1.0, 2.0]}, index=pd.DatetimeIndex(["2026-10-25 02:50", "2026-10-25 02:10"]))
    out = localized(indexed, "Europe/Berlin", "frame")
    assert [str(t) for t in out.index] == ["2026-10-25 02:50:00+02:00", "2026-10-25 02:10:00+01:00"]


@pytest.mark.parametrize("times, fragment", [
    (["2026-03-29 01:30", "2026-03-29 02:30"],
     "t.csv: column 'timestamp' row 2: '2026-03-29 02:30' is no time in Europe/Berlin (the clocks skip it"),
    ([1700000000, 1700000060], "t.csv: column 'timestamp' holds numbers, not date-times: --time-zone reads local"),
    (["1700000000", "1700000060"], "value '1700000000' is no date-time: --time-zone reads local date-times"),
    (["run-a", "run-b"], "value 'run-a' is no date-time"),
])
def test_what_names_no_local_time_is_refused_at_its_row(times, fragment):
    with pytest.raises(InputError) as caught:
        Reading(time_zone="Europe/Berlin").frame(pd.DataFrame({TIMESTAMP: times, "a": 1.0}), "t.csv")
    assert fragment in str(caught.value)


def test_a_missing_time_is_left_to_the_order_check():
    frame = pd.DataFrame({TIMESTAMP: ["2026-10-25 01:50", None], "a": 1.0})
    read = Reading(time_zone="Europe/Berlin").frame(frame, "t.csv")
    with pytest.raises(InputError, match="row 2: missing timestamp"):
        table_from_frame(read, "t.csv")


@pytest.mark.parametrize("zone", ["Mars/Base", "", "../etc/passwd", 7])
def test_a_zone_not_known_is_refused(zone):
    with pytest.raises(InputError, match="train.time_zone .*: must be None or an IANA time zone name"):
        MSCRED(time_zone=zone).resolved_config()
    if isinstance(zone, str):
        with pytest.raises(InputError, match="not a time zone known here"):
            Reading(time_zone=zone)


def _local_export(rows: int, seed: int, start: str = "2026-10-24 23:00") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the export in Berlin's wall time, the same rows with their offsets): a minute apart through the autumn
    change's repeated hour."""
    frame = sensor_frame(rows, 4, seed=seed)
    truth = _true_times("Europe/Berlin", start, rows, 60)
    local, zoned = frame.copy(), frame.copy()
    local[TIMESTAMP] = _wall(truth)
    zoned[TIMESTAMP] = truth.strftime("%Y-%m-%d %H:%M:%S%z").str.replace(r"(\d\d)$", r":\1", regex=True)
    return local, zoned


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("time_zone")
    local, _ = _local_export(400, seed=1)
    local.to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--time-zone",
                 "Europe/Berlin", *TRAIN]) == 0
    return folder, folder / "model"


def test_train_refuses_the_repeated_hour_without_a_zone_and_keeps_the_zone(trained, tmp_path, capsys):
    folder, model = trained
    bad_input(capsys, "train", folder / "train.csv", "--out", tmp_path / "m", *TRAIN,
              names=["is earlier than the row before's", "give their zone (--time-zone Europe/Berlin)"])
    assert json.loads((model / "config.json").read_text())["config"]["train"]["time_zone"] == "Europe/Berlin"
    code, out, err = run_cli(capsys, "info", model, "--json")
    assert code == 0, err
    assert json.loads(out)["reads_data_with"] == "--time-zone Europe/Berlin"
    bad_input(capsys, "train", folder / "train.csv", "--out", tmp_path / "m", "--time-zone", "Mars/Base", *TRAIN,
              names=["--time-zone", "not a time zone known here"])


def test_detect_calibrate_and_evaluate_read_the_models_zone(trained, tmp_path, capsys):
    """The model's zone read at detect: SCORES.csv's times carry their offsets, and score as the same rows written
    with them (the same instants); calibrate reads the same; evaluate matches labels in wall time to them."""
    folder, model = trained
    local, zoned = _local_export(300, seed=2, start="2026-10-25 00:00")
    local.to_csv(tmp_path / "local.csv", index=False)
    zoned.to_csv(tmp_path / "zoned.csv", index=False)
    for name in ("local", "zoned"):
        assert main(["detect", str(model), str(tmp_path / f"{name}.csv"), "--out", str(tmp_path / f"{name}_s.csv"),
                     *ON_THE_CPU]) == 0
    got = pd.read_csv(tmp_path / "local_s.csv", **float_read_options())
    pd.testing.assert_frame_equal(got, pd.read_csv(tmp_path / "zoned_s.csv", **float_read_options()))
    assert got[TIMESTAMP].iloc[0] == "2026-10-25 02:00:00+02:00" and got[TIMESTAMP].is_unique
    assert got[TIMESTAMP].str.endswith("+01:00").sum() == 300 - 60   # (from 02:00 CET on: the last 240 rows)
    assert main(["calibrate", str(model), str(tmp_path / "local.csv"), "--out", str(tmp_path / "cal"),
                 *ON_THE_CPU]) == 0
    labels = local.assign(label=(np.arange(300) > 150).astype(int))
    labels.to_csv(tmp_path / "labels.csv", index=False)
    capsys.readouterr()   # (the commands' lines before)
    code, out, err = run_cli(capsys, "evaluate", tmp_path / "local_s.csv", "--labels", tmp_path / "labels.csv",
                             "--time-zone", "Europe/Berlin", "--json")
    assert code == 0, err
    # --model reads the labels as the model reads its data: its zone, without --time-zone
    code, by_model, err = run_cli(capsys, "evaluate", tmp_path / "local_s.csv", "--labels", tmp_path / "labels.csv",
                                  "--model", model, "--json")
    assert code == 0 and json.loads(by_model) == json.loads(out), err
    # without the zone the labels' wall times are refused beside the scores' instants
    bad_input(capsys, "evaluate", tmp_path / "local_s.csv", "--labels", tmp_path / "labels.csv",
              names=["labels.csv"])


def test_detect_takes_another_zone_for_its_data(trained, tmp_path, capsys):
    folder, model = trained
    local, _ = _local_export(200, seed=3)
    local[TIMESTAMP] = _wall(_true_times("America/Chicago", "2026-11-01 04:30", 200, 60))
    local.to_csv(tmp_path / "chicago.csv", index=False)
    bad_input(capsys, "detect", model, tmp_path / "chicago.csv", "--out", tmp_path / "s.csv", *ON_THE_CPU,
              names=["earlier than the row before's"])
    assert main(["detect", str(model), str(tmp_path / "chicago.csv"), "--out", str(tmp_path / "s.csv"),
                 "--time-zone", "America/Chicago", *ON_THE_CPU]) == 0
    assert pd.read_csv(tmp_path / "s.csv")[TIMESTAMP].iloc[-1].endswith("-06:00")


def test_watch_and_the_monitor_read_on_through_the_repeated_hour(trained, tmp_path, capsys, monkeypatch):
    """A growing CSV in wall time whose second piece starts in the hour's second pass, and a Monitor fed the same
    chunks: both go on where the whole table's times go."""
    folder, model = trained
    local, zoned = _local_export(260, seed=4, start="2026-10-24 22:30")
    cut = 160   # the second piece starts at 02:10 CET, within the second pass: nothing in it says so
    assert local[TIMESTAMP].iloc[cut] == "2026-10-25 02:10:00" and local[TIMESTAMP].iloc[89] == "2026-10-25 01:59:00"
    data, out = tmp_path / "feed.csv", tmp_path / "watch.csv"
    local.iloc[:cut].to_csv(data, index=False)
    replace_waits(monkeypatch, watch_module,
                  lambda: local.iloc[cut:].to_csv(data, mode="a", header=False, index=False))
    code, _, err = run_cli(capsys, "watch", model, data, "--out", out, "--interval", "0.01", *ON_THE_CPU)
    assert code == 0, err
    assert main(["detect", str(model), str(data), "--out", str(tmp_path / "d.csv"), *ON_THE_CPU]) == 0
    watched, detected = pd.read_csv(out), pd.read_csv(tmp_path / "d.csv")
    assert watched[TIMESTAMP].tolist() == detected[TIMESTAMP].tolist()
    monitor = MSCRED.load(model).monitor()
    first, second = monitor.update(local.iloc[:cut]), monitor.update(local.iloc[cut:])
    times = pd.concat([first[TIMESTAMP], second[TIMESTAMP]])
    assert pd.DatetimeIndex(times).equals(pd.DatetimeIndex(pd.to_datetime(zoned[TIMESTAMP], utc=True)).tz_convert(
        "Europe/Berlin").as_unit("ns"))
    # a chunk refused leaves the monitor as it was: the next good chunk reads on from the same time
    again = MSCRED.load(model).monitor()
    again.update(local.iloc[:cut])
    with pytest.raises(InputError):
        again.update(local.iloc[cut:].assign(s0="x"))
    assert pd.DatetimeIndex(again.update(local.iloc[cut:])[TIMESTAMP]).equals(pd.DatetimeIndex(second[TIMESTAMP]))


def test_inspect_and_the_resampling_grid_read_in_the_zone(tmp_path, capsys):
    local, _ = _local_export(300, seed=5)
    local.to_csv(tmp_path / "local.csv", index=False)
    code, out, err = run_cli(capsys, "inspect", tmp_path / "local.csv", "--time-zone", "Europe/Berlin", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["rows"] == 300
    read = Reading(time_zone="Europe/Berlin", resample="10min").frame(local, "local.csv")
    table = table_from_frame(read, "local.csv")
    steps = np.diff(pd.DatetimeIndex(table.index).asi8)
    assert len(table.index) == 30 and (steps == 600 * 10 ** 9).all()


def test_a_long_feed_watched_in_wall_time(tmp_path, capsys, monkeypatch):
    """A historian's long export in wall time, a line a sensor a minute, trained with --long and --time-zone, then
    watched as it grows: its second piece starts within the second pass, its lines held a time until the next shows
    them complete; the scores' times are those detect reads from the whole file (but the last time's, held: no
    later time came to show its lines complete)."""
    local, _ = _local_export(300, seed=6, start="2026-10-24 22:30")
    long = local.assign(row=np.arange(300)).melt(id_vars=["row", TIMESTAMP], var_name="Tag", value_name="Value")
    long = long.sort_values("row", kind="stable").drop(columns="row").reset_index(drop=True)   # (a time's lines)
    long.to_csv(tmp_path / "train.csv", index=False)
    model = tmp_path / "model"
    assert main(["train", str(tmp_path / "train.csv"), "--out", str(model), "--long", "Tag,Value", "--time-zone",
                 "Europe/Berlin", *TRAIN]) == 0
    data, out = tmp_path / "feed.csv", tmp_path / "watch.csv"
    cut = 4 * 160 + 2   # (02:10 CET's first two lines: its other two come in the next piece)
    long.iloc[:cut].to_csv(data, index=False)
    replace_waits(monkeypatch, watch_module,
                  lambda: long.iloc[cut:].to_csv(data, mode="a", header=False, index=False))
    code, _, err = run_cli(capsys, "watch", model, data, "--out", out, "--interval", "0.01", "--idle-exit", "0.05",
                           *ON_THE_CPU)
    assert code == 0, err
    assert main(["detect", str(model), str(data), "--out", str(tmp_path / "d.csv"), *ON_THE_CPU]) == 0
    watched, detected = pd.read_csv(out), pd.read_csv(tmp_path / "d.csv")
    assert len(detected) == 300 and detected[TIMESTAMP].is_unique
    assert watched[TIMESTAMP].tolist() == detected[TIMESTAMP].tolist()[:-1]


@pytest.mark.parametrize("missing", ["error", "interpolate"])
def test_a_files_feed_and_its_context_carry_the_clock(trained, tmp_path, missing):
    """detect of a folder of rolled files, and of a file after its --context, where a file starts in the repeated
    hour's second pass: scored as the whole table in one file (a file alone would read its rows as the first pass,
    earlier than the file before)."""
    folder, model = trained
    local, _ = _local_export(300, seed=7, start="2026-10-24 22:30")
    cut = 160   # (02:10 CET)
    local.to_csv(tmp_path / "whole.csv", index=False)
    (tmp_path / "feed").mkdir()
    local.iloc[:cut].to_csv(tmp_path / "feed" / "a.csv", index=False)
    local.iloc[cut:].to_csv(tmp_path / "feed" / "b.csv", index=False)
    common = ("--missing", missing, *ON_THE_CPU)
    assert main(["detect", str(model), str(tmp_path / "whole.csv"), "--out", str(tmp_path / "w.csv"), *common]) == 0
    assert main(["detect", str(model), str(tmp_path / "feed"), "--out", str(tmp_path / "f.csv"), *common]) == 0
    whole = pd.read_csv(tmp_path / "w.csv", **float_read_options())
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "f.csv", **float_read_options()), whole)
    assert main(["detect", str(model), str(tmp_path / "feed" / "b.csv"), "--context", str(tmp_path / "feed" / "a.csv"),
                 "--out", str(tmp_path / "c.csv"), *common]) == 0
    after = pd.read_csv(tmp_path / "c.csv", **float_read_options())
    assert after[TIMESTAMP].tolist() == whole[TIMESTAMP].iloc[cut:].tolist()
    assert after[TIMESTAMP].iloc[0] == "2026-10-25 02:10:00+01:00"


def test_a_row_out_of_order_within_the_repeated_hour_is_named_not_the_change():
    """A line repeated (or two swapped) within the first pass: the clock's change is the row stepping back farthest,
    so the order check names the row the table got wrong."""
    truth = _true_times("Europe/Berlin", "2026-10-24 23:30", 120, 300)
    wall = list(_wall(truth))
    assert wall[6] == "2026-10-25 02:00:00" and wall[18] == "2026-10-25 02:00:00"   # (first and second pass)
    repeated = wall[:10] + [wall[9]] + wall[10:]
    swapped = wall[:8] + [wall[9], wall[8]] + wall[10:]
    for times, fragment in ((repeated, "row 11: timestamp '2026-10-25 02:15:00+02:00' repeats the row before"),
                            (swapped, "row 10: timestamp '2026-10-25 02:10:00+02:00' is earlier than the row "
                                      "before's '2026-10-25 02:15:00+02:00'")):
        read = Reading(time_zone="Europe/Berlin").frame(pd.DataFrame({TIMESTAMP: times, "a": 1.0}), "t.csv")
        with pytest.raises(InputError) as caught:
            table_from_frame(read, "t.csv")
        assert fragment in str(caught.value)


def test_evaluate_reads_an_anomalies_tables_wall_times_in_the_zone(tmp_path, capsys):
    """An anomalies table's start and end written in the site's wall time, with --time-zone: the same events as
    the same table written with offsets, through the hour the clocks go back; a start or end inside that hour (two
    instants) is refused naming both offsets, one the clocks skip likewise."""
    instants = pd.date_range("2026-10-24 23:00", periods=240, freq="1min", tz="UTC")   # 01:00+02:00 .. 03:59+01:00
    local = instants.tz_convert("Europe/Berlin")
    scores = pd.DataFrame({TIMESTAMP: local.map(lambda t: t.isoformat(sep=" ")),
                           "score": np.random.default_rng(0).random(240), "is_anomaly": 0, "root_causes": "",
                           "scales": ""})
    scores.loc[20:29, "is_anomaly"] = scores.loc[200:214, "is_anomaly"] = 1
    scores.to_csv(tmp_path / "s.csv", index=False)
    events = [(20, 30), (200, 215)]   # (01:20-01:30 summer time; 03:20-03:35 winter time)
    (tmp_path / "labels_local").mkdir()
    (tmp_path / "labels_zoned").mkdir()
    for name, shown in (("local", lambda t: t.strftime("%Y-%m-%d %H:%M:%S")), ("zoned", lambda t: t.isoformat())):
        pd.DataFrame({"start": [shown(local[a]) for a, _ in events], "end": [shown(local[b]) for _, b in events],
                      "root_causes": ["s1", "s2"]}).to_csv(tmp_path / f"labels_{name}" / "anomalies.csv",
                                                            index=False)
    got = {}
    for name in ("local", "zoned"):
        code, out, err = run_cli(capsys, "evaluate", tmp_path / "s.csv", "--labels",
                                 tmp_path / f"labels_{name}" / "anomalies.csv", "--time-zone", "Europe/Berlin",
                                 "--json")
        assert code == 0, err
        got[name] = json.loads(out)
    assert got["local"] == got["zoned"] and got["local"]["n_anomalous_rows"] == 25
    assert got["local"]["f1"] == 1.0
    for wall, fragment in (("2026-10-25 02:30:00", "comes twice in Europe/Berlin (the clocks go back): write it "
                                                   "with its offset, +02:00 (the first time) or +01:00 (the second)"),
                           ("2026-03-29 02:30:00", "is no time in Europe/Berlin")):
        pd.DataFrame({"start": ["2026-10-25 01:10:00", wall], "end": ["2026-10-25 01:20:00", "2026-10-25 03:50:00"]}
                     ).to_csv(tmp_path / "bad.csv", index=False)
        bad_input(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "bad.csv", "--time-zone",
                  "Europe/Berlin", names=["bad.csv: column 'start' row 2", fragment])
