"""`mscred detect` and the table reader against industrial sensor exports (audit of 2026-12-03).

What a plant historian or SCADA export throws at them: epoch times in nanoseconds, durations since the start,
numbers stored as text, ISO 8601 written two ways in one file, day-first dates, local times over a clock change,
comment lines, trailing separators, thousands separators, a 'time' column under another name, and times finer than
float64 holds. Each case either scores with every SCORES row carrying its DATA row's time exactly, or is refused
with exit 2 and one line naming the file, column and row (tests/test_cli_messy.py holds the older cases).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input, run_cli, sensor_frame, tiny_model
from mscred.data.io import load_table
from mscred.errors import InputError

N, ROWS = 5, 200


def _frame(rows: int = ROWS, seed: int = 0) -> pd.DataFrame:
    return sensor_frame(rows, N, seed)


def _parquet(path: Path, frame: pd.DataFrame) -> Path:
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    frame.to_parquet(path)
    return path


def _refused(path: Path, *fragments: str) -> str:
    with pytest.raises(InputError) as info:
        load_table(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("audit_detect_model") / "model", _frame())


def _detect(capsys, model_dir: Path, data: Path, out: Path) -> pd.DataFrame:
    code, _, err = run_cli(capsys, "detect", model_dir, data, "--out", out, "--device", "cpu")
    assert code == 0, err
    return pd.read_csv(out, dtype={"timestamp": str}, keep_default_na=False) if out.suffix == ".csv" else \
        pd.read_parquet(out)


# --------------------------------------------------------------------------------------- numeric timestamps
def test_epoch_nanoseconds_are_compared_as_integers(tmp_path, capsys, model_dir):
    """int64 epoch nanoseconds were compared as float64, where 1700000000123456789 and ...790 are one value: a
    sorted file was refused with "repeats the row before" (and named a time the file does not hold)."""
    frame = _frame().assign(timestamp=1_700_000_000_123_456_789 + np.arange(ROWS))
    data = tmp_path / "ns.csv"
    frame.to_csv(data, index=False)
    scores = _detect(capsys, model_dir, data, tmp_path / "s.csv")
    assert scores["timestamp"].tolist() == [str(v) for v in frame["timestamp"]]
    frame.loc[[50, 51], "timestamp"] = frame.loc[[51, 50], "timestamp"].to_numpy()
    frame.to_csv(data, index=False)
    _refused(data, "column 'timestamp' row 52", "1700000000123456839", "earlier than")


def test_uint64_times_beyond_int64_are_ordered_exactly(tmp_path):
    frame = _frame().assign(timestamp=np.arange(ROWS, dtype=np.uint64) + np.uint64(2 ** 63))
    table = load_table(_parquet(tmp_path / "u64.parquet", frame))
    assert list(table.index) == list(frame["timestamp"])


def test_numbers_stored_as_text_are_ordered_as_numbers(tmp_path):
    """A Parquet text column of epoch seconds (or row numbers) was taken for ids, only checked for repeats: a
    reversed or swapped file scored in the wrong order without a word."""
    frame = _frame().assign(timestamp=(1_700_000_000 + np.arange(ROWS)).astype(str))
    assert load_table(_parquet(tmp_path / "ok.parquet", frame)).index[5] == "1700000005"
    swapped = frame.copy()
    swapped.loc[[50, 51], "timestamp"] = swapped.loc[[51, 50], "timestamp"].to_numpy()
    _refused(_parquet(tmp_path / "swapped.parquet", swapped), "row 52", "'1700000050' is earlier than")
    _refused(_parquet(tmp_path / "rev.parquet", frame.iloc[::-1]), "row 2", "earlier than")


def test_numeric_times_with_a_text_cell_are_still_ordered(tmp_path):
    """One text cell ('--') among integer times made pandas read the column as text, the times as 'ids', and a
    reversed file went through; the cell itself is now named."""
    frame = _frame().iloc[::-1].astype({"timestamp": object})
    frame.iloc[100, 0] = "--"
    data = tmp_path / "dash.csv"
    frame.to_csv(data, index=False)
    _refused(data, "column 'timestamp' row 101", "'--' is not a number like the rows before it")


@pytest.mark.parametrize("where, row", [(6, 6), (None, ROWS + 1)], ids=["middle", "end"])
def test_comment_line_is_named_as_such(tmp_path, where, row):
    """A '# maintenance' line inside the data was reported as a missing value of the first sensor (and with
    --missing interpolate it became a scored row)."""
    lines = _frame().to_csv(index=False).splitlines()
    lines.insert(where if where is not None else len(lines), "# maintenance 2024-03-01")
    data = tmp_path / "comment.csv"
    data.write_text("\n".join(lines) + "\n")
    _refused(data, f"column 'timestamp' row {row}", "not a number", "a comment line? remove it")
    with pytest.raises(InputError, match="comment line"):
        load_table(data, missing="interpolate")


def test_float_epoch_finer_than_float64_keeps_its_text(tmp_path, capsys, model_dir):
    """Epoch seconds to the tenth of a microsecond (1700000000.0000001) were read as float64: a sorted file was
    refused as "1700000000.0 repeats the row before"; where the rounding kept them apart SCORES.csv would have
    written other times than DATA's. The column keeps its text, ordered exactly."""
    frame = _frame()
    times = [f"1700000000.{i:07d}" for i in range(ROWS)]
    data = tmp_path / "fine.csv"
    frame.assign(timestamp=times).to_csv(data, index=False)
    scores = _detect(capsys, model_dir, data, tmp_path / "s.csv")
    assert scores["timestamp"].tolist() == times
    times[60], times[61] = times[61], times[60]
    frame.assign(timestamp=times).to_csv(data, index=False)
    _refused(data, "row 62", "'1700000000.0000060' is earlier than")
    # float64 times that round-trip stay numbers, as before
    frame.assign(timestamp=1_700_000_000 + 0.25 * np.arange(ROWS)).to_csv(data, index=False)
    assert load_table(data).index.dtype == np.float64


def test_reversed_durations_are_refused(tmp_path):
    """A timedelta 'timestamp' (seconds since the start, from Parquet) was not read as times at all: reversed, it
    scored without a word."""
    frame = _frame().assign(timestamp=pd.to_timedelta(np.arange(ROWS), unit="s"))
    assert len(load_table(_parquet(tmp_path / "ok.parquet", frame)).index) == ROWS
    _refused(_parquet(tmp_path / "rev.parquet", frame.iloc[::-1]), "row 2", "'0 days 00:03:18' is earlier than")


# ------------------------------------------------------------------------------------------------ date text
def test_iso_times_written_two_ways_are_read_as_times(tmp_path, capsys, model_dir):
    """A logger that writes '2024-03-01T00:00:00' and later '2024-03-01 00:00:01', or drops '.000' on whole
    seconds, was refused as "not a date/time like the rows before it". SCORES keeps each row's text."""
    base = pd.date_range("2024-03-01", periods=ROWS, freq="500ms")
    times = [t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond // 1000:03d}" if t.microsecond else "")
             for t in base]
    times[150:] = [t.replace("T", " ") for t in times[150:]]
    _times_kept_and_order_checked(tmp_path / "iso.csv", times, 170, capsys, model_dir)


def test_day_first_dates_are_read_day_first(tmp_path, capsys, model_dir):
    """31/01/2024-style dates were read month first: refused at the 13th of the month as "not a date/time"."""
    times = pd.date_range("2024-03-01", periods=ROWS, freq="D").strftime("%d/%m/%Y").tolist()
    _times_kept_and_order_checked(tmp_path / "dmy.csv", times, 20, capsys, model_dir)


def _times_kept_and_order_checked(data, times: list[str], swap: int, capsys, model_dir) -> None:
    """DATA with ``times`` as its timestamp column scores with those texts in SCORES; with rows ``swap`` and
    ``swap + 1`` exchanged it is refused at the second (1-based ``swap + 2``) as earlier than the row before."""
    _frame().assign(timestamp=times).to_csv(data, index=False)
    scores = _detect(capsys, model_dir, data, data.with_name("s.csv"))
    assert scores["timestamp"].tolist() == times
    times = list(times)
    times[swap], times[swap + 1] = times[swap + 1], times[swap]
    _frame().assign(timestamp=times).to_csv(data, index=False)
    _refused(data, f"row {swap + 2}", "earlier than")


def test_zoned_and_unzoned_times_mixed_are_refused(tmp_path):
    """A row without a UTC offset among rows with one is not silently taken as UTC."""
    times = pd.date_range("2024-03-01", periods=ROWS, freq="s", tz="Europe/Berlin").astype(str).tolist()
    times[100] = times[100][:-6]
    data = tmp_path / "mixed.csv"
    _frame().assign(timestamp=times).to_csv(data, index=False)
    _refused(data, "column 'timestamp' row 101", "has no time zone, unlike row 1")


def test_mixed_offsets_over_a_clock_change_keep_their_text(tmp_path, capsys, model_dir):
    times = pd.date_range("2024-03-31 00:00", periods=ROWS, freq="min", tz="Europe/Berlin").astype(str).tolist()
    assert times[0].endswith("+01:00") and times[-1].endswith("+02:00")
    data = tmp_path / "dst.csv"
    _frame().assign(timestamp=times).to_csv(data, index=False)
    assert _detect(capsys, model_dir, data, tmp_path / "s.csv")["timestamp"].tolist() == times


def test_local_times_repeating_an_hour_get_the_clock_change_hint(tmp_path):
    times = (pd.date_range("2024-11-03 00:30", periods=ROWS, freq="min", tz="America/New_York")
             .tz_localize(None).astype(str).tolist())
    data = tmp_path / "fallback.csv"
    _frame().assign(timestamp=times).to_csv(data, index=False)
    _refused(data, "row 91", "earlier than", "clocks go back", "UTC")


# ------------------------------------------------------------------------------------------ other columns
@pytest.mark.parametrize("name", ["time", "Date", "unix_time", "index"])
def test_time_column_under_another_name_is_not_a_sensor(tmp_path, capsys, name):
    """A 'time' column of epoch seconds trained as a sensor (a rising ramp) without a word, and every later window
    at detect was out of its range: anomalous, root cause 'time'."""
    data = tmp_path / "time.csv"
    _frame().assign(**{name: 1_700_000_000 + np.arange(ROWS)}).to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1,
              names=(str(data), f"column '{name}'", "increase on every row", "name it 'timestamp'"))
    assert not (tmp_path / "m").exists()
    # a sensor that happens to be called 'time' but goes up and down is a sensor
    wavy = _frame().assign(time=np.sin(np.arange(ROWS)))
    wavy.to_csv(data, index=False)
    assert "time" in load_table(data).sensors


def test_separators_at_the_end_of_every_line_are_named(tmp_path):
    """Two trailing commas a line: the hint named a saved DataFrame index instead."""
    data = tmp_path / "trailing.csv"
    data.write_text(_frame().to_csv(index=False).replace("\n", ",,\n"))
    _refused(data, "column 7 has no name", "a separator at the end of every line?")


def test_thousands_separator_gets_its_hint(tmp_path):
    frame = _frame().astype({"s2": object})
    frame["s2"] = [f"{1000 * v:,.2f}" for v in _frame()["s2"]]
    data = tmp_path / "thousands.csv"
    frame.to_csv(data, index=False)
    first = next(i for i, v in enumerate(frame["s2"]) if "," in v)
    _refused(data, f"column 's2' row {first + 1}", "a thousands separator?")


# ----------------------------------------------------------------------------------------------- outputs
def test_out_dash_is_standard_output_not_a_file_named_dash(tmp_path, capsys, model_dir, monkeypatch):
    """Refused before 2026-12-05 (a file named '-' was never what was meant); now standard output, as a pipeline
    means it (tests/test_detect_stdio.py): still never a file of that name."""
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "detect", model_dir, data, "--out", "-", "--device", "cpu")
    assert code == 0 and out.startswith("timestamp,score,is_anomaly")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("out", ["s.csv", "s.parquet"])
def test_chunked_scoring_keeps_every_rows_zoned_sub_second_time(tmp_path, capsys, model_dir, monkeypatch, out):
    """A series longer than the scoring chunk (STREAM_SEGMENT_BYTES made tiny): each SCORES row carries its DATA
    row's time exactly (nanoseconds, time zone) and the scores of one pass."""
    import mscred.detector as detector

    if out.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    times = pd.date_range("2024-03-01", periods=1200, freq="250ms", tz="America/New_York") + pd.to_timedelta(
        np.arange(1200), unit="ns")
    data = _parquet(tmp_path / "long.parquet", _frame(1200, seed=4).assign(timestamp=times))
    whole = _detect(capsys, model_dir, data, tmp_path / ("whole_" + out))
    monkeypatch.setattr(detector, "STREAM_SEGMENT_BYTES", 4 * 3 * N * N * 8)
    chunked = _detect(capsys, model_dir, data, tmp_path / out)
    assert len(chunked) == 1200
    # (ISO8601: pandas 3.0 takes the first row's format, without the fraction its whole second is written without)
    stamps = (pd.to_datetime(chunked["timestamp"], format="ISO8601") if out.endswith(".csv")
              else chunked["timestamp"])
    assert (pd.DatetimeIndex(stamps).asi8 == times.asi8).all()
    if out.endswith(".parquet"):
        assert str(chunked["timestamp"].dtype.tz) == "America/New_York"
    np.testing.assert_allclose(chunked["score"], whole["score"], rtol=1e-5, atol=1e-6)
    assert (chunked["is_anomaly"] == whole["is_anomaly"]).all() and chunked["score"].abs().sum() > 0


@pytest.mark.parametrize("bom", [False, True], ids=["plain", "with a BOM"])
def test_two_exports_joined_name_the_second_header(tmp_path, bom):
    """``cat a.csv b.csv``: b's header (after its byte-order mark) became a data row; with numeric times the column
    turned to text and its order went unchecked, and the BOM rode along into SCORES' timestamps."""
    times = pd.date_range("2024-03-01", periods=2 * ROWS, freq="s")
    first = _frame().assign(timestamp=times[:ROWS].astype(str)).to_csv(index=False).encode()
    second = _frame(seed=1).assign(timestamp=times[ROWS:].astype(str)).to_csv(index=False).encode()
    data = tmp_path / "joined.csv"
    data.write_bytes(first + (b"\xef\xbb\xbf" if bom else b"") + second)
    _refused(data, f"column 'timestamp' row {ROWS + 1}", "a second header line: two files joined?")
    numeric = _frame().to_csv(index=False).encode()
    data.write_bytes(numeric + b"\xef\xbb\xbf" + numeric.split(b"\n", 1)[1])
    _refused(data, f"column 'timestamp' row {ROWS + 1}", "byte-order mark inside the file")


def test_a_gap_in_time_is_noted_and_an_even_series_is_not(tmp_path, capsys, model_dir):
    """Windows count rows: a 3-hour historian outage in minute data was scored across as if the rows touched, and
    nothing said so. One note on stderr names it; the scores and exit code are unchanged."""
    regular = pd.date_range("2024-03-01", periods=ROWS, freq="min")
    times = regular.where(np.arange(ROWS) < 120, regular + pd.Timedelta(hours=3))
    data = tmp_path / "outage.csv"
    _frame().assign(timestamp=times.astype(str)).to_csv(data, index=False)
    code, out, err = run_cli(capsys, "detect", model_dir, data, "--out", tmp_path / "s.csv", "--device", "cpu")
    assert code == 0 and out.startswith("scored")
    assert err.startswith("note: ") and len(err.splitlines()) == 1, err
    for fragment in (str(data), "row 121", "jumps by 3 h 1 min", "the usual step is 1 min", "windows count rows"):
        assert fragment in err, (fragment, err)
    even = tmp_path / "even.csv"
    _frame().assign(timestamp=regular.astype(str)).to_csv(even, index=False)
    jitter = tmp_path / "jitter.csv"
    _frame().assign(timestamp=np.cumsum(np.random.default_rng(0).integers(1, 100, ROWS))).to_csv(jitter, index=False)
    for quiet in (even, jitter):
        code, _, err = run_cli(capsys, "detect", model_dir, quiet, "--out", tmp_path / "s.csv", "--device", "cpu")
        assert code == 0 and err == "", err


def test_train_notes_a_gap_in_time_too(tmp_path, capsys):
    """The windows train over a gap as detect scores over one: train says so in the same note."""
    regular = pd.date_range("2024-03-01", periods=ROWS, freq="min")
    data = tmp_path / "outage.csv"
    _frame().assign(timestamp=regular.where(np.arange(ROWS) < 120, regular + pd.Timedelta(hours=3)).astype(str)) \
        .to_csv(data, index=False)
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                           "--quiet")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "time jumps" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "row 121" in notes[0], err
    assert notes[0].endswith("split the table before row 121 and give both parts as DATA"), notes[0]


# ------------------------------------------------------------------------------------------------ label column


def test_detect_ignores_a_label_column_train_and_evaluate_check_it(tmp_path, capsys):
    """detect does not use labels, yet a label column being filled in (empty cells, a note) was refused there:
    "column 'label' row 3: missing value". detect now drops it unread (no sensor, as at training, where the model
    was fitted beside a label column); train and evaluate, which use it, still refuse it."""
    from mscred.detector import MSCRED

    labelled = _frame().assign(label=0)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(labelled)
    assert "label" not in model.sensors_
    model.save(tmp_path / "model")
    plain, partial, noted = tmp_path / "plain.csv", tmp_path / "partial.csv", tmp_path / "noted.csv"
    _frame().to_csv(plain, index=False)
    label = pd.Series([0.0, 1.0, np.nan] * (ROWS // 3) + [np.nan] * (ROWS % 3))
    _frame().assign(label=label).to_csv(partial, index=False)
    _frame().assign(label=["", "ok", "fault?"] * (ROWS // 3) + [""] * (ROWS % 3)).to_csv(noted, index=False)
    expected = _detect(capsys, tmp_path / "model", plain, tmp_path / "plain_scores.csv")
    for data in (partial, noted):
        pd.testing.assert_frame_equal(_detect(capsys, tmp_path / "model", data, tmp_path / "s.csv"), expected)
    assert load_table(partial, ignore_label=True).labels is None
    # the Python API scores a DataFrame with such a column as the CLI does
    scored = model.detect(_frame().assign(label=label))
    pd.testing.assert_frame_equal(scored, model.detect(_frame()))
    _refused(partial, "column 'label' row 3", "missing value")   # by default the reader checks it
    bad_input(capsys, "train", partial, "--out", tmp_path / "m2", "--epochs", 1, "--device", "cpu", "--quiet",
              names=(str(partial), "column 'label' row 3"))
    assert not (tmp_path / "m2").exists()
    bad_input(capsys, "evaluate", tmp_path / "plain_scores.csv", "--labels", noted,
              names=(str(noted), "column 'label'", "'ok'"))
