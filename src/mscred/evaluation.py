"""Read a SCORES.csv and its ground truth, and compute every metric beside a seeded random baseline.

The library side of ``mscred evaluate`` (the CLI only parses options and prints). Ground truth comes either from a
table with a ``label`` column (CSV/Parquet; when it also has sensor columns their values are kept for the report)
or from an ``anomalies.csv`` with ``start,end,root_causes`` (``end`` exclusive, on the ``timestamp`` scale, as
``mscred generate`` writes it; numbers, or date-times placed by instant on date-time timestamps). An
``anomalies.csv`` beside a labelled table is picked up for root causes, unless ``anomalies="none"``.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from mscred import metrics as M
from mscred.data import io
from mscred.data.reading import PLAIN, Reading
from mscred.detect import SENSOR_SCORE_PREFIX, sensor_score_columns
from mscred.errors import InputError, NoteWarning
from mscred.vus import DEFAULT_SLIDING_WINDOW, vus

ANOMALIES_FILE = "anomalies.csv"
# ``anomalies=NO_ANOMALIES`` (``--anomalies none``): no anomalies table, not even the one beside the labels (an
# unrelated anomalies.csv in the labels' folder was read, and refused, with no way to leave it out).
NO_ANOMALIES = "none"

# (key, label, note) rows of the printed table and of the report, in order.
METRIC_ROWS = [
    ("precision", "point precision", ""),
    ("recall", "point recall", ""),
    ("f1", "point F1", ""),
    ("event_recall", "event recall", "events with at least one flagged row"),
    ("root_cause_recall_at_3", "root-cause recall@3", "per event, top 3 by votes of flagged rows"),
    ("auc_roc", "AUC-ROC", "threshold-free"),
    ("auc_pr", "AUC-PR", "threshold-free (average precision)"),
    ("vus_roc", "VUS-ROC", "threshold-free, range-based"),
    ("vus_pr", "VUS-PR", "threshold-free, range-based"),
    ("pa_f1", "point-adjusted F1", "inflated: one hit marks a whole event"),
    ("pa_k_auc", "PA%K F1, area over K", "Kim et al. 2022"),
    ("best_f1_uses_labels", "best F1 (threshold chosen WITH labels)", "oracle, not a detector figure"),
]


@dataclass
class Scores:
    """A SCORES.csv: one row per input row."""

    index: np.ndarray  # (T,) timestamps, or row numbers
    score: np.ndarray  # float64 (T,)
    is_anomaly: np.ndarray  # int8 (T,)
    root_causes: list[list[str]]  # (T,) sensor names, most anomalous first; [] on normal rows
    has_timestamp: bool
    source: str
    # (T, m) float64 of the score_<sensor> columns (`detect --sensor-scores`), NaN where no window covers a row;
    # None without them. ``scored_sensors``: those m sensor names.
    sensor_scores: Optional[np.ndarray] = None
    scored_sensors: list[str] = field(default_factory=list)


@dataclass
class GroundTruth:
    labels: np.ndarray  # int8 (T,), aligned with the SCORES rows
    events: np.ndarray  # int64 (E, 2) [start, end) in SCORES rows
    causes: Optional[list[set[str]]]  # per event, when known
    values: Optional[np.ndarray] = None  # float64 (T, n) sensor values, when the labels came with the data
    sensors: list[str] = field(default_factory=list)
    source: str = ""
    gaps: Optional[np.ndarray] = None  # bool (T, n): values interpolated by missing="interpolate", if any
    events_outside: int = 0  # events of an anomalies table with no scored row (dropped; said in the results)
    events_clipped: int = 0  # events of an anomalies table partly before/after the scored rows (cut to them; said)
    events_source: str = ""  # the anomalies table the events (and causes) came from; "" when from the label column


def read_frame(path: str | os.PathLike, events_ok: bool = False, encoding: Optional[str] = None) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame with string column names; every failure is an InputError naming
    the file. Text is kept as written ("NA" stays a string), only empty cells are missing. ``events_ok``: an
    anomalies table (start, end) may have no rows: data without anomalies (``datasets`` writes a header-only
    anomalies.csv for it, ``generate_synthetic(n_anomalies=0)`` too), where a table of no rows is otherwise refused.
    ``encoding``: a CSV's text encoding, as ``mscred.data.io.load_table``'s (None: UTF-8, a BOM allowed)."""
    df = io.read_frame(path, npy=False, encoding=encoding, keep_default_na=False, na_values=[""])
    df.columns = [str(c) for c in df.columns]
    if df.shape[0] == 0 and not (events_ok and _is_anomalies_table(df)):
        raise InputError(f"{path}: the table has no data rows")
    return df


def _numeric(df: pd.DataFrame, col: str, source: str, allow_empty: bool = False) -> np.ndarray:
    """A column of finite numbers; with ``allow_empty``, empty cells read as NaN (rows no window covers, in the
    score_<sensor> columns). Text or infinities are refused, naming the row."""
    values = io.coerce_float64(df[col])
    empty = df[col].isna().to_numpy() if allow_empty else np.zeros(len(values), dtype=bool)
    bad = np.flatnonzero(~np.isfinite(values) & ~empty)
    if len(bad):
        raise InputError(f"{source}: column '{col}' row {bad[0] + 1}: value {io.short_repr(df[col].iloc[bad[0]])} is not a "
                         f"finite number{' or empty' if allow_empty else ''}")
    return values


def _zero_one(df: pd.DataFrame, col: str, source: str) -> np.ndarray:
    values = _numeric(df, col, source)
    bad = np.flatnonzero((values != 0) & (values != 1))
    if len(bad):
        raise InputError(f"{source}: column '{col}' row {bad[0] + 1}: {io.short_repr(df[col].iloc[bad[0]])} is not 0 or 1")
    return values.astype(np.int8)


def split_names(cell) -> list[str]:
    """The sensor names of a root_causes cell ("a;b;c"; empty or missing: none), also for datasets' own checks."""
    if cell is None or (isinstance(cell, float) and np.isnan(cell)):
        return []
    return [name.strip() for name in str(cell).split(";") if name.strip()]


def read_scores(path: str | os.PathLike) -> Scores:
    """Read and validate a SCORES.csv (timestamp or row, score, is_anomaly, root_causes). Always as UTF-8 (a BOM
    allowed): mscred writes it so, whatever the encoding of the data it scored."""
    source = str(path)
    df = read_frame(path)
    for col in ("score", "is_anomaly"):
        if col not in df.columns:
            raise InputError(f"{source}: missing column '{col}' (a SCORES.csv has timestamp or row, score, "
                             "is_anomaly, root_causes)")
    has_ts = "timestamp" in df.columns
    if has_ts:
        index = df["timestamp"].to_numpy()
        gaps = np.flatnonzero(pd.isna(index))
        if len(gaps):  # (was blamed on the labels file's timestamp, or an event silently left off that row)
            raise InputError(f"{source}: column 'timestamp' row {gaps[0] + 1}: missing timestamp")
    elif "row" in df.columns:
        index = _numeric(df, "row", source).astype(np.int64)
    else:
        index = np.arange(len(df))
    causes = [split_names(c) for c in df["root_causes"]] if "root_causes" in df.columns else [[]] * len(df)
    columns = sensor_score_columns(df)
    per_sensor = np.stack([_numeric(df, c, source, allow_empty=True) for c in columns], axis=1) if columns else None
    return Scores(index=index, score=_numeric(df, "score", source), is_anomaly=_zero_one(df, "is_anomaly", source),
                  root_causes=causes, has_timestamp=has_ts, source=source, sensor_scores=per_sensor,
                  scored_sensors=[str(c)[len(SENSOR_SCORE_PREFIX):] for c in columns])


def _is_anomalies_table(df: pd.DataFrame) -> bool:
    return {"start", "end"} <= set(df.columns) and "label" not in df.columns


def metric_rows(result: dict) -> list[tuple[str, str, str]]:
    """The (key, label, note) rows of ``result`` that evaluate prints and the report shows, in METRIC_ROWS' order,
    with what depends on the result written in: the events found out of how many, and the VUS window L (the report
    had shown VUS without the L its figure was measured at)."""
    rows = []
    for key, label, note in METRIC_ROWS:
        if key not in result:
            continue
        if key == "event_recall" and result.get("events_total"):
            label = f"events found ({result['events_found']}/{result['events_total']})"
        if key.startswith("vus") and result.get("vus_sliding_window") is not None:
            note = f"{note}, L = {result['vus_sliding_window']}"
        rows.append((key, label, note))
    return rows


def event_notes(result: dict) -> list[str]:
    """What ``compute_metrics``' counts of left-out and cut events mean, in words: printed under evaluate's table and
    shown in the report (whose page once said "events found 2/2" for 5 events, 3 outside the scores, silently)."""
    notes = []
    if result.get("events_outside"):
        notes.append(f"{result['events_outside']} event(s) of the anomalies table lie outside the scored timestamps "
                     "and were left out")
    if result.get("events_clipped"):
        notes.append(f"{result['events_clipped']} event(s) of the anomalies table reach past the scored timestamps "
                     "and were cut to them")
    return notes


def events_from_anomalies(df: pd.DataFrame, index: np.ndarray, source: str,
                          timestamps: str = "the SCORES file's", refuse_outside: bool = False,
                          labels: Optional[np.ndarray] = None, labels_source: str = "",
                          dates_ok: bool = False, time_zone: Optional[str] = None
                          ) -> tuple[np.ndarray, list[set[str]], int, int]:
    """Map anomalies (start, end exclusive, on the timestamp scale) onto row intervals of ``index``: (events,
    causes, how many events had no scored row and were dropped, how many kept ones began before the first scored
    row or ended after the last one's step and were cut to the scored rows). ``timestamps`` names whose timestamps
    ``index`` holds, in the messages; ``refuse_outside``: an event with no row is an InputError naming it, not
    dropped (a dataset's own anomalies file, checked at load). ``labels`` (int8, aligned with ``index``; from
    ``labels_source``): an event over none of its anomalous rows is said in a note (NoteWarning). ``dates_ok``:
    start/end may be date-times, placed by instant (UTC) on date-time timestamps; off, they must be numbers.
    ``time_zone``: the zone of start/end date-times written without an offset (each read alone: one in the hour the
    clocks go back is refused, naming the offsets that tell its two instants apart)."""
    missing = [c for c in ("start", "end") if c not in df.columns]
    if missing:
        raise InputError(f"{source}: no {' and no '.join(repr(c) for c in missing)} column: an anomalies table has "
                         "start, end (timestamps, end exclusive) and optionally root_causes")
    starts, ends, times = _event_bounds(df, source, dates_ok, time_zone)
    show = _show_time if times else _show_number
    bad = np.flatnonzero(ends <= starts)
    if len(bad):
        raise InputError(f"{source}: row {bad[0] + 1}: end {show(ends[bad[0]])} is not after start "
                         f"{show(starts[bad[0]])}")
    position = _timestamp_positions(df, index, times, source, timestamps, dates_ok)
    _check_positions(position, index, source, timestamps)
    causes_col = df["root_causes"] if "root_causes" in df.columns else [None] * len(df)
    rows, causes, clipped, disagree = [], [], 0, []
    # An end (exclusive) up to one step past the last row still lies inside: the step is the last spacing.
    last_end = position[-1] + (position[-1] - position[-2] if len(position) > 1 else 1) if len(position) else 0
    for k, (s, e, c) in enumerate(zip(starts, ends, causes_col)):
        a, b = np.searchsorted(position, s, side="left"), np.searchsorted(position, e, side="left")
        if b <= a and refuse_outside and len(position):
            raise InputError(f"{source}: row {k + 1}: interval {show(s)}..{show(e)} covers none of {timestamps} "
                             f"timestamps ({show(position[0])} .. {show(position[-1])})")
        if b > a:  # events outside the scored rows are dropped, those partly inside cut to them
            if labels is not None and not labels[a:b].any():
                disagree.append((k, show(s), show(e)))
            rows.append((a, b))
            causes.append(set(split_names(c)))
            clipped += bool(s < position[0] or e > last_end)
    if len(starts) and not rows and len(position):
        # Not one event on the scored rows: almost surely start/end on another scale (row numbers against epoch
        # times, seconds against milliseconds); metrics on zero anomalies would be meaningless, not an answer.
        raise InputError(f"{source}: none of its {len(starts)} event(s) (start {show(starts.min())} .. end "
                         f"{show(ends.max())}) overlaps {timestamps} timestamps ({show(position[0])} .. "
                         f"{show(position[-1])}): start/end must be on {timestamps} timestamp scale")
    if disagree:
        _disagree(source, disagree, labels_source)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2), causes, len(starts) - len(rows), clipped


def _show_number(value) -> str:
    return f"{value:g}"


def _show_time(value) -> str:
    """An instant of ``_instants`` in a message: UTC, as every date-time is compared (naive ones read as UTC)."""
    return pd.Timestamp(int(value), unit="ns", tz="UTC").isoformat(sep=" ")


def _instants(times: pd.DatetimeIndex, source: str, what: str) -> np.ndarray:
    """int64 nanoseconds since 1970 UTC: one unit for both files (pandas keeps each parse's own unit, seconds or
    microseconds, and ``asi8`` counts in it); float64 would round them to about 256 ns."""
    try:
        return times.as_unit("ns").asi8
    except (OverflowError, ValueError):   # pandas' OutOfBoundsDatetime
        raise InputError(f"{source}: {what}: a date-time before 1677 or after 2262, which cannot be placed to the "
                         "nanosecond") from None


def _event_bounds(df: pd.DataFrame, source: str, dates_ok: bool, time_zone: Optional[str] = None
                  ) -> tuple[np.ndarray, np.ndarray, bool]:
    """start and end of an anomalies table on one scale: (float64, float64, False) when both hold numbers, (int64
    UTC nanoseconds, ..., True) when ``dates_ok`` and both hold date-times ('2024-01-01 10:00:00' was "not a finite
    number" while a SCORES file's date-time timestamps were accepted), else an InputError naming the cell.
    ``time_zone``: the zone of date-times written without an offset (``evaluate --time-zone``)."""
    numbers = [_as_numbers(df[c]) for c in ("start", "end")]
    if all(n is not None for n in numbers):
        return numbers[0], numbers[1], False
    if not dates_ok:
        return _numeric(df, "start", source), _numeric(df, "end", source), False   # raises, naming the cell
    times = [_as_times(df[c].to_numpy(), time_zone, f"{source}: column '{c}'") for c in ("start", "end")]
    if all(t is not None for t in times):
        return (_instants(times[0], source, "column 'start'"), _instants(times[1], source, "column 'end'"), True)
    for col, n, t in zip(("start", "end"), numbers, times):
        if n is None and t is None:
            _refuse_bound(df[col], col, source)
    # each column reads as one scale, but not the same one
    col = "start" if numbers[0] is not None else "end"
    raise InputError(f"{source}: column '{col}' holds numbers and column '{'end' if col == 'start' else 'start'}' "
                     "date-times: give both on one scale")


def _as_numbers(column: pd.Series) -> Optional[np.ndarray]:
    """``column`` as float64 when every cell is a finite number, else None; a datetime column is no numbers
    (to_numeric gives its epoch count)."""
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        return None
    values = io.coerce_float64(column)
    return values if np.isfinite(values).all() else None


def _refuse_bound(column: pd.Series, col: str, source: str) -> None:
    """The InputError for a start or end column that reads as neither numbers nor date-times, at its first cell
    unlike row 1's: a date-time column reads in row 1's format (and time zone or none), as ``_as_times`` does."""
    numeric = pd.api.types.is_numeric_dtype(column.dtype)   # (a number column with an empty cell: no date-times)
    parsed = None if numeric else io.parse_times(column.to_numpy())
    if parsed is not None and not pd.isna(parsed[0]):
        r = int(np.flatnonzero(parsed.isna())[0])
        raise InputError(f"{source}: column '{col}' row {r + 1}: value {io.short_repr(column.iloc[r])} is not a "
                         f"date-time like row 1's {io.short_repr(column.iloc[0])}")
    numbers = io.coerce_float64(column)
    r = int(np.flatnonzero(~np.isfinite(numbers))[0])
    kind = "neither a finite number nor a date-time" if r == 0 else "not a finite number like row 1's"
    raise InputError(f"{source}: column '{col}' row {r + 1}: value {io.short_repr(column.iloc[r])} is {kind}"
                     + (f" {io.short_repr(column.iloc[0])}" if r else ""))


def _timestamp_positions(df: pd.DataFrame, index: np.ndarray, times: bool, source: str, timestamps: str,
                         dates_ok: bool) -> np.ndarray:
    """``index`` on the scale of start/end (``times``: int64 instants, else float64 numbers), or an InputError
    saying that the two files are on different scales. A datetime64 index (a Parquet SCORES) is date-times: numpy
    converts it to floats (epoch nanoseconds) without a word. A table of no events fits any scale."""
    index = np.asarray(index)
    numbers = stamps = None
    if not np.issubdtype(index.dtype, np.datetime64):
        try:
            numbers = np.asarray(index, dtype=np.float64)   # ("NaN" text too: _check_positions names it)
        except (TypeError, ValueError):
            pass
    if numbers is None:
        stamps = _as_times(index)
    if stamps is not None and (times or not len(df)):
        return _instants(stamps, source, f"{timestamps} timestamps")
    if numbers is not None and (not times or not len(df)):
        return numbers
    if not len(df):   # (ids, no times: a header-only table beside them was refused)
        return np.arange(len(index), dtype=np.float64)
    first = io.short_repr(index[0])
    if not dates_ok:
        raise InputError(f"{source}: start/end need numeric timestamps in {timestamps} rows ({first} ..)")
    bounds = f"start/end are {'date-times' if times else 'numbers'} ({io.short_repr(df['start'].iloc[0])} ..)"
    if numbers is not None or stamps is not None:
        raise InputError(f"{source}: {bounds} but {timestamps} timestamps are {'numbers' if times else 'date-times'} "
                         f"({first} ..): give both on one scale")
    raise InputError(f"{source}: {bounds}: cannot place them on {timestamps} timestamps ({first} ..), which are "
                     "neither numbers nor date-times")


def _check_positions(position: np.ndarray, index: np.ndarray, source: str, timestamps: str) -> None:
    """Timestamps that start/end can be placed on: numbers ("NaN" text converts to one, and searchsorted over a NaN
    put events on the wrong rows), strictly increasing (a repeated time took both rows into an event)."""
    bad = np.flatnonzero(~np.isfinite(position))
    if len(bad):
        raise InputError(f"{source}: {timestamps} row {bad[0] + 1} has timestamp {io.short_repr(index[bad[0]])}, "
                         "not a finite number: cannot place start/end on it")
    bad = np.flatnonzero(np.diff(position) <= 0)
    if len(bad):
        raise InputError(f"{source}: {timestamps} timestamps are not increasing (row {bad[0] + 2}: "
                         f"{io.short_repr(index[bad[0] + 1])} after {io.short_repr(index[bad[0]])}), cannot place "
                         "start/end on them")


def _disagree(source: str, events: list[tuple[int, str, str]], labels_source: str) -> None:
    """One note (not a refusal: a label column with no anomaly beside a table of events is read as before) that
    ``events`` (table row, start, end as shown) of ``source`` lie on rows ``labels_source`` calls all normal:
    another run's anomalies.csv beside the labels, whose events the event figures (events found, root causes)
    counted against the label column's point figures, silently."""
    k, start, end = events[0]
    more = f" (and {len(events) - 1} more)" if len(events) > 1 else ""
    warnings.warn(f"{source}: row {k + 1}: interval {start}..{end}{more} covers no row that {labels_source} "
                  "labels anomalous: the two files disagree (event figures count this file's events)", NoteWarning,
                  stacklevel=3)


def _check_alignment(scores: Scores, index: Optional[np.ndarray], n_rows: int, source: str) -> None:
    if n_rows != len(scores.score):
        # (scores of a model that resamples have a row a period: the labels need the same grid)
        hint = ("; scored on a time grid (a model trained with --resample)? give evaluate the same --resample"
                if n_rows > len(scores.score) and scores.has_timestamp else "")
        raise InputError(f"{source}: has {n_rows} rows but {scores.source} has {len(scores.score)}{hint}")
    if index is not None and scores.has_timestamp:
        differ = _differ(index, scores.index)
        if len(differ):
            r = differ[0]
            raise InputError(f"{source}: row {r + 1}: timestamp {io.short_repr(index[r])} differs from {scores.source}'s "
                             f"{io.short_repr(scores.index[r])}")


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows whose timestamps differ: numbers as numbers (100 == 100.0), date-times as instants, others as text.
    As text, a Parquet table's datetime column differed from the same times in a SCORES.csv (`detect` of
    test.parquet writes '2024-01-02 00:00:00'): evaluate refused detect's own output beside its data. A datetime64
    column is no numbers here: numpy counts it in its own unit, and the same times in ns and in us differed."""
    if not any(np.issubdtype(np.asarray(v).dtype, np.datetime64) for v in (a, b)):
        try:
            return np.flatnonzero(np.asarray(a, dtype=np.float64) != np.asarray(b, dtype=np.float64))
        except (TypeError, ValueError):
            pass
    times_a, times_b = _as_times(a), _as_times(b)
    if times_a is not None and times_b is not None:
        return np.flatnonzero(np.asarray(times_a != times_b))
    return np.flatnonzero(np.asarray(a).astype(str) != np.asarray(b).astype(str))


def _as_times(values: np.ndarray, time_zone: Optional[str] = None, where: str = "") -> Optional[pd.DatetimeIndex]:
    """``values`` as UTC date-times when every one reads as one (text, datetime64, datetime objects), else None;
    numbers are no date-times here (to_datetime would read them as epoch nanoseconds). ``time_zone``: wall times
    without an offset are that zone's, each placed alone (``time_zone.placed_alone``; ``where`` names the column)."""
    values = pd.Index(values)
    if pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
        return None
    parsed = io.parse_times(values)
    if parsed.isna().any():
        return None
    if time_zone is not None:
        from mscred.data.time_zone import placed_alone

        return placed_alone(values, time_zone, where)
    return parsed


def read_ground_truth(path: str | os.PathLike, scores: Scores,
                      anomalies: Optional[str | os.PathLike] = None, missing: str = "error",
                      encoding: Optional[str] = None, reading: Optional[Reading] = None) -> GroundTruth:
    """Labels (and root causes, sensor values when available) aligned with the rows of ``scores``; ``anomalies``:
    the anomalies table of events and root causes (default: the one beside ``path``, if any; ``NO_ANOMALIES``:
    none, the events are the label column's runs); ``missing``: what a missing sensor value of a data table gets
    (``mscred.data.io.load_table``); ``encoding``: the text encoding of the labels and anomalies CSV files, the
    user's own (None: UTF-8); ``reading``: how a labels table's cells are read beyond its format (its time
    column under another name, text for a missing value: ``mscred.data.reading``)."""
    from mscred.data.io import table_from_frame

    source = str(path)
    zone = None if reading is None else reading.time_zone   # (an anomalies table's start and end: in it too)
    df = read_frame(path, events_ok=True, encoding=encoding)
    if _is_anomalies_table(df):
        if _is_none(anomalies):   # (there is no label column to take the events from instead)
            raise InputError(f"{source}: --labels is itself an anomalies table (start, end), and --anomalies "
                             f"{NO_ANOMALIES} means no anomalies table: give labels with a 'label' column")
        if anomalies is not None and not _same_file(anomalies, path):
            # (its events and root causes were ignored without a word, a missing file too)
            raise InputError(f"{anomalies}: --labels {source} is itself an anomalies table (start, end): give the "
                             "events and their root causes in one of the two")
        events, causes, outside, clipped = events_from_anomalies(df, scores.index, source, dates_ok=True,
                                                                 time_zone=zone)
        labels = np.zeros(len(scores.score), dtype=np.int8)
        for a, b in events:
            labels[a:b] = 1
        return GroundTruth(labels, events, causes, source=source, events_outside=outside, events_clipped=clipped,
                           events_source=source)
    if "label" not in df.columns:
        raise InputError(f"{source}: no 'label' column and no start/end columns: cannot read ground truth")
    df = (reading or PLAIN).frame(df, source)
    sensors = [c for c in df.columns if c not in ("timestamp", "label")]
    values = gaps = None
    index = df["timestamp"].to_numpy() if "timestamp" in df.columns else None
    if sensors:  # a data table: validate it as training/detection would, and keep the values for the report
        table = table_from_frame(df, source=source, missing=missing)
        labels, values, gaps = table.labels.astype(np.int8), table.values, table.gaps
        index = np.asarray(table.index) if table.resampled is not None else index
    elif reading is not None and reading.resample is not None:   # labels alone, put on the scores' grid
        _zero_one(df, "label", source)
        table = table_from_frame(df.assign(**{_NO_SENSOR: 0.0}), source=source, missing="interpolate")
        labels, index = table.labels.astype(np.int8), np.asarray(table.index)
    else:
        labels = _zero_one(df, "label", source)
    _check_alignment(scores, index, len(labels), source)
    events, causes, outside, clipped = M.events(labels), None, 0, 0
    beside = _anomalies_beside(path, anomalies)
    if beside is not None:
        a_events, a_causes, a_outside, a_clipped = events_from_anomalies(
            read_frame(beside, events_ok=True, encoding=encoding), scores.index, str(beside), labels=labels,
            labels_source=source, dates_ok=True, time_zone=zone)
        if len(a_events):
            events, causes, outside, clipped = a_events, a_causes, a_outside, a_clipped
    events_source = str(beside) if beside is not None and causes is not None else ""
    return GroundTruth(labels, events, causes, values=values, sensors=sensors, source=source, gaps=gaps,
                       events_outside=outside, events_clipped=clipped, events_source=events_source)


# A column of zeros that lets a labels table without sensors go through table_from_frame's resampling
_NO_SENSOR = "mscred_no_sensor"


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _is_none(anomalies) -> bool:
    """``anomalies`` is the word ``none`` (a str, as the CLI passes it; a Path named so is a file)."""
    return isinstance(anomalies, str) and anomalies == NO_ANOMALIES


def _anomalies_beside(labels_path: str | os.PathLike, anomalies: Optional[str | os.PathLike]) -> Optional[Path]:
    """The anomalies table to read events and root causes from: None for ``NO_ANOMALIES``, ``anomalies`` as given
    (an InputError when missing; the labels table itself is read as one too, and refused for its columns: it was
    "file not found"), else an anomalies.csv beside the labels that is not the labels table itself, else None."""
    if _is_none(anomalies):
        return None
    if anomalies is not None:
        if not Path(anomalies).exists():
            raise InputError(f"{anomalies}: file not found")
        return Path(anomalies)
    beside = Path(labels_path).parent / ANOMALIES_FILE
    return beside if beside.exists() and not _same_file(beside, labels_path) else None


def read_data(path: str | os.PathLike, scores: Scores, missing: str = "error", encoding: Optional[str] = None,
              reading: Optional[Reading] = None):
    """The scored data (``--data``: the report's series and residuals) as a ``mscred.data.io.Table``, row for row
    the rows of ``scores`` by the rule --labels is held to (as many rows; the same timestamps when both have them,
    compared by ``_differ``). Another file, or one shifted by 100 steps, was drawn against the scores silently.
    ``encoding`` and ``reading``: as ``load_table``'s."""
    from mscred.data.io import load_table

    table = load_table(path, missing=missing, encoding=encoding, reading=reading)
    # a RangeIndex is no timestamps of the file's own (no 'timestamp' column, a .npy array): its rows are compared
    index = None if isinstance(table.index, pd.RangeIndex) else table.index.to_numpy()
    _check_alignment(scores, index, len(table.values), str(path))
    return table


def event_causes(scores: Scores, events: np.ndarray, pred: Optional[np.ndarray] = None) -> list[list[str]]:
    """Per event, the ranking of root causes voted by the flagged rows inside it (empty when none is flagged).

    ``pred`` (int8 (T,)) says which rows are flagged; the SCORES file's ``is_anomaly`` when None.
    """
    return [M.rank_event_causes(flagged_causes(scores, a, b, pred)) for a, b in events]


def flagged_causes(scores: Scores, a: int, b: int, pred: Optional[np.ndarray] = None) -> list[list[str]]:
    """The root-cause lists of the flagged rows of [a, b) (``pred``, else the SCORES file's ``is_anomaly``): what
    ``event_causes`` ranks, and what the report's bar charts count votes of."""
    flags = scores.is_anomaly if pred is None else pred
    return [scores.root_causes[t] for t in range(a, b) if flags[t]]


def _threshold_free(labels: np.ndarray, score: np.ndarray, sliding_window: int) -> dict:
    if labels.min() == labels.max():
        return {"auc_roc": None, "auc_pr": None, "vus_roc": None, "vus_pr": None, "best_f1_uses_labels": None}
    v_roc, v_pr = vus(labels, score, sliding_window=sliding_window)
    best, _ = M.best_f1(labels, score)
    return {"auc_roc": M.auc_roc(labels, score), "auc_pr": M.auc_pr(labels, score), "vus_roc": v_roc,
            "vus_pr": v_pr, "best_f1_uses_labels": best.f1}


def _thresholded(labels: np.ndarray, pred: np.ndarray, events: np.ndarray) -> dict:
    point, adjusted = M.point_prf(labels, pred), M.pa_f1(labels, pred)
    found = int(sum(pred[a:b].any() for a, b in events))
    return {"precision": point.precision, "recall": point.recall, "f1": point.f1,
            "events_found": found, "events_total": int(len(events)),
            "event_recall": found / len(events) if len(events) else None,
            "pa_f1": adjusted.f1, "pa_k_auc": M.pa_k_auc(labels, pred)}


def sensor_pool(truth: GroundTruth, model_dir=None, data=None) -> list[str]:
    """The sensors the random baseline draws its root causes from: the labelled table's sensor columns, else the
    model's (its config.json), else the scored data's columns; [] when none is known (``compute_metrics`` then
    draws from the sensors the files name). Without it an anomalies.csv as --labels drew from fewer sensors than
    the test.csv beside it, and the baseline's recall@k changed with the way the labels were given."""
    if truth.sensors:
        return list(truth.sensors)
    if model_dir is not None:
        try:
            named = json.loads((Path(model_dir) / "config.json").read_text()).get("sensors")
        except (OSError, ValueError, AttributeError):   # a damaged model: the report, if any, says so
            named = None
        if isinstance(named, list) and named:
            return [str(name) for name in named]
    if data is not None and not data.positional:   # (``read_data``'s Table; an array names no sensor)
        return list(data.sensors)
    return []


def model_reading(model_dir) -> dict:
    """How a model reads its data, from its config.json's train section as saved (``evaluate --model``: the labels
    and data on the scores' grid, read as ``detect`` read the scored data): ``time_column``, ``time_zone``,
    ``resample`` (str or None), ``na_values``, ``states`` (tuples of str), ``long_columns`` (two names or None);
    each None or empty where absent, of another type, or the config cannot be read."""
    saved = _model_train_section(model_dir)   # (config.json read once)

    def text(name):
        value = saved.get(name)
        return value if isinstance(value, str) else None

    def texts(name):
        value = saved.get(name)
        return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else ()

    long_columns = texts("long_columns")
    return {"time_column": text("time_column"), "time_zone": text("time_zone"), "resample": text("resample"),
            "na_values": texts("na_values"), "states": texts("states"),
            "long_columns": long_columns if len(long_columns) == 2 else None}


def _model_train_section(model_dir) -> dict:
    """A model's config.json's train section as saved, {} where it cannot be read."""
    try:
        section = json.loads((Path(model_dir) / "config.json").read_text())["config"]["train"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return section if isinstance(section, dict) else {}


def compute_metrics(scores: Scores, truth: GroundTruth, pred: Optional[np.ndarray] = None,
                    sliding_window: int = DEFAULT_SLIDING_WINDOW, k: int = 3, seed: int = 0,
                    sensors: Optional[list[str]] = None) -> dict:
    """Every metric of the detector and of a seeded random baseline, as one JSON-ready dict.

    Parameters
    ----------
    pred : int8 (T,), optional
        Predictions; the SCORES file's ``is_anomaly`` when None.
    sliding_window : int
        VUS sliding window L (buffers 0..2L, TSB-AD's convention).
    seed : int
        Seed of the random baseline: uniform scores in [0, 1) for the threshold-free metrics, and for the
        thresholded ones a random choice of as many rows as the detector flagged; for root causes, k sensors
        drawn at random from ``sensors`` for each event the detector found.
    """
    labels, score = truth.labels, scores.score
    pred = scores.is_anomaly if pred is None else np.asarray(pred, dtype=np.int8)
    out = {"n_rows": int(labels.size), "n_anomalous_rows": int(labels.sum()), "n_flagged_rows": int(pred.sum()),
           "vus_sliding_window": sliding_window, "events_outside": truth.events_outside,
           "events_clipped": truth.events_clipped}
    out.update(_thresholded(labels, pred, truth.events))
    out.update(_threshold_free(labels, score, sliding_window))
    key = f"root_cause_recall_at_{k}"
    truth_causes = truth.causes if truth.causes and any(truth.causes) else None
    # Root causes are ranked on the rows the SCORES file flags, whatever threshold ``pred`` refits: those are the
    # rows detect wrote causes for. An event found only through a refit threshold's extra rows has none, and once
    # scored 0 there while the baseline drew sensors for it (0.0 against 1.0 on an event the detector did find).
    if truth_causes is not None:
        out[key] = M.root_cause_recall_at_k(truth_causes, event_causes(scores, truth.events), k)

    rng = np.random.default_rng(seed)
    random_score = rng.random(labels.size)
    random_pred = np.zeros(labels.size, dtype=np.int8)
    random_pred[rng.permutation(labels.size)[: int(pred.sum())]] = 1
    baseline = {"seed": seed}
    baseline.update(_thresholded(labels, random_pred, truth.events))
    baseline.update(_threshold_free(labels, random_score, sliding_window))
    pool = set(sensors or truth.sensors) | {n for c in (truth_causes or []) for n in c}
    pool = sorted(pool | {n for row in scores.root_causes for n in row})
    if truth_causes is not None and len(pool) >= k:
        # random top-k sensors for exactly the events the detector's flagged rows found (missed ones score 0 for
        # both), so the two root-cause figures differ only in the ranking
        found = [bool(scores.is_anomaly[a:b].any()) for a, b in truth.events]
        ranked = [list(rng.permutation(pool)[:k]) if f else [] for f in found]
        baseline[key] = M.root_cause_recall_at_k(truth_causes, ranked, k)
    out["random_baseline"] = baseline
    return out


def evaluate_files(scores_path, labels_path, anomalies=None, report_dir=None, model_dir=None, data_path=None,
                   pred: Optional[np.ndarray] = None, sliding_window: int = DEFAULT_SLIDING_WINDOW,
                   seed: int = 0, missing: str = "error", encoding: Optional[str] = None,
                   reading: Optional[Reading] = None) -> dict:
    """``mscred evaluate`` as a function (for ``mscred demo`` and scripts): metrics dict, optional HTML report.

    Parameters
    ----------
    scores_path : a SCORES.csv written by ``mscred detect``
    labels_path : a table with a ``label`` column, or an anomalies.csv (start, end, root_causes)
    anomalies : the anomalies table (events, root causes) [default: the one beside ``labels_path``, if any;
        ``"none"``: none]
    report_dir : when given, ``report_dir/index.html`` is written (needs matplotlib)
    model_dir, data_path : the model and the scored data, for the report's residual heatmaps and series (the data
        must align with the scores as the labels must: an InputError otherwise)
    pred : int8 (T,) predictions replacing the SCORES file's ``is_anomaly`` (e.g. a refitted threshold)
    missing : what a missing sensor value in the data tables gets ("error", "interpolate" or "hold", as at detect)
    encoding : text encoding of the CSV files of labels, anomalies and data (None: UTF-8, a BOM allowed); the
        SCORES file, mscred's own, is read as UTF-8
    reading : how the labels and data tables are read beyond their format (``mscred.data.reading``)
    """
    scores = read_scores(scores_path)
    truth = read_ground_truth(labels_path, scores, anomalies, missing=missing, encoding=encoding, reading=reading)
    data = read_data(data_path, scores, missing, encoding, reading) if data_path is not None else None
    result = compute_metrics(scores, truth, pred=pred, sliding_window=sliding_window, seed=seed,
                             sensors=sensor_pool(truth, model_dir, data))
    if report_dir is not None:
        from mscred.report import build_report

        build_report(report_dir, scores, truth, result, pred=pred, model_dir=model_dir, data_path=data_path,
                     missing=missing, data=data, encoding=encoding)
    return result
