"""Read and validate input tables (CSV, Parquet, .npy) and normalise them.

Every numeric column of a table is a sensor, except a column named ``timestamp`` (kept as the index) and one named
``label`` (ground truth 0/1, ignored by training). Every bad input raises :class:`~mscred.errors.InputError` with one
line saying what is wrong and where: file, column and 1-based data row (row 1 is the first row after the header).
"""
from __future__ import annotations

import calendar
import codecs
import csv
import dataclasses
import functools
import os
import re
import shlex
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from mscred.config import MISSING_POLICIES
from mscred.errors import InputError, TextColumnError

__all__ = ["Table", "load_table", "table_from_frame", "Normalizer", "TIMESTAMP", "LABEL"]

TIMESTAMP = "timestamp"
LABEL = "label"
_CSV = {".csv", ".txt", ".tsv"}
_PARQUET = {".parquet", ".pq"}
_NPY = {".npy"}
POSITIONAL = "mscred_positional"   # DataFrame.attrs key of a frame whose column names are positions (a .npy array)
# DataFrame.attrs key: the name the file gave the column read as 'timestamp' (``mscred.data.reading``), for messages.
TIME_NAME = "mscred_time_name"
# The index name of a long table made wide (mscred.data.reading.widened), whose index holds each row's time: messages
# name a row by its time too, since the file's lines are not the wide table's rows.
ROW_TIME = "mscred_row_time"
# The missing policy, beside MISSING_POLICIES, that keeps missing values as NaN (no error, no filling): tables read
# to be put on a grid or joined to others first, which then decide (mscred.data.resample, mscred.feed)
KEEP = "keep"
# The missing policies that fill a missing value (``fill_missing``), as against "error" and ``KEEP``
FILLING = ("interpolate", "hold")
# DataFrame.attrs key: the sensors whose missing values are held whatever the missing policy says of the others
# (``Reading.hold``, the ``train.hold_sensors`` setting: states and step tags beside float tags), read by
# ``table_from_frame`` as the time grid's period is (``mscred.data.resample.RESAMPLE``)
HOLD = "mscred_hold"
# Compressed text tables that pandas decompresses itself: ``data.csv.gz`` reads as ``data.csv``.
_COMPRESSED = {".gz", ".bz2", ".xz", ".zip", ".zst"}


@dataclass
class Table:
    """A validated multivariate series.

    Attributes
    ----------
    values : np.ndarray, float64, shape (T, n)
        Sensor values, all finite.
    sensors : list of str, length n
        Sensor (column) names, in column order.
    index : pd.Index, length T
        The ``timestamp`` column, or a RangeIndex 0..T-1.
    labels : np.ndarray of int64, shape (T,), or None
        The ``label`` column (0 normal, 1 anomalous), when present.
    source : str
        Where the table came from (a path, or ``<DataFrame>``), for messages.
    positional : bool
        The columns have no names of their own (a plain .npy array, read as ``sensor_0``, ``sensor_1``, ...): a
        model matches them to its sensors by position, as it does an array in Python.
    filled : dict of str to int
        Missing values filled per sensor (``missing="interpolate"`` or ``"hold"``; empty otherwise).
    gaps : np.ndarray of bool, shape (T, n), or None
        Where values were filled (None when none was).
    filled_by : str or None
        How they were filled: "interpolate" or "hold" (the missing policy), None where none was (or only ``held``
        sensors' were).
    held : tuple of str
        The sensors whose missing values are held whatever ``filled_by`` says (``HOLD``); any policy but ``KEEP``
        fills them, "error" too.
    rated : tuple of str
        The sensors whose values are their rates already (``mscred.data.rate.rated``: a monitor's tail and chunk
        rated as one); empty for a table as read.
    time_gap : (int, str, str) or None
        The largest step between consecutive timestamps when it is more than 10 usual ones (``largest_time_gap``): its
        1-based row, its size and the usual step, as text; None for an even series, row numbers or ids.
    time_note : str or None
        Which way date text such as ``01/02/2024`` was read (day or month first) where both readings give increasing
        times (``_day_month_reading``), with the source and column; None otherwise.
    uneven : (str, str, str) or None
        Where the steps between consecutive timestamps vary widely (``uneven_steps``: a tenth of them more than
        four times another tenth), the 10th percentile, median and 90th percentile step as text; None otherwise.
    resampled : (int, str) or None
        Where the table was put on a time grid (``mscred.data.resample``): the rows read and the period's text;
        None otherwise.
    """

    values: np.ndarray
    sensors: list[str]
    index: pd.Index
    labels: Optional[np.ndarray] = None
    source: str = field(default="<DataFrame>")
    filled: dict[str, int] = field(default_factory=dict)
    gaps: Optional[np.ndarray] = None
    positional: bool = False
    time_gap: Optional[tuple[int, str, str]] = None
    time_note: Optional[str] = None
    resampled: Optional[tuple[int, str]] = None
    uneven: Optional[tuple[str, str, str]] = None
    filled_by: Optional[str] = None
    held: tuple[str, ...] = ()
    rated: tuple[str, ...] = ()

    def fills_by_holding(self, sensor: str) -> bool:
        """Whether ``sensor``'s missing values were (or are to be) filled by holding its last value."""
        return self.filled_by == "hold" or sensor in self.held

    def in_order(self, sensors: Sequence[str]) -> "Table":
        """The table with its columns (values, and where they were filled) in the order of ``sensors``, the same
        names as its own in any order (the caller has checked that)."""
        if list(sensors) == list(self.sensors):
            return self
        order = [self.sensors.index(s) for s in sensors]
        return dataclasses.replace(self, values=self.values[:, order], sensors=list(sensors),
                                   gaps=None if self.gaps is None else self.gaps[:, order])

    def last(self, rows: int) -> "Table":
        """The table's last ``rows`` rows (values, index, labels and where values were filled, counted again)."""
        start = len(self.values) - rows
        if start <= 0:
            return self
        gaps = None if self.gaps is None else self.gaps[start:]
        filled = {} if gaps is None else {s: int(n) for s, n in zip(self.sensors, gaps.sum(axis=0)) if n}
        return dataclasses.replace(self, values=self.values[start:], index=self.index[start:],
                                   labels=None if self.labels is None else self.labels[start:],
                                   gaps=gaps if filled else None, filled=filled, time_gap=None)

    def frame(self, with_label: bool = True) -> pd.DataFrame:
        """The table as a DataFrame (sensor columns, plus ``label`` when present), indexed by ``index``."""
        df = pd.DataFrame(self.values, columns=self.sensors, index=self.index)
        if with_label and self.labels is not None:
            df[LABEL] = self.labels
        return df


def load_table(path: str | os.PathLike, missing: str = "error", ignore_label: bool = False,
               encoding: Optional[str] = None, reading: Optional["Reading"] = None,
               raw: Optional[pd.DataFrame] = None) -> Table:
    """Read a CSV, Parquet or .npy file and validate it.

    Parameters
    ----------
    path : str or PathLike
        ``.csv`` (also ``.txt``/``.tsv``, and any of them compressed as ``.gz``/``.bz2``/``.xz``/``.zip``/``.zst``;
        the separator is sniffed for .txt/.tsv, and for a .csv whose header holds no comma but a ';', tab or '|', or
        whose header and rows read as one column of blank-separated fields, as many in each; in a table not
        separated by ',' a column written with decimal commas throughout is read as decimals),
        ``.parquet``/``.pq``, or ``.npy`` (a 2-D numeric
        array (T, n) whose columns become ``sensor_0 ..``, a 1-D array (T,) as one sensor, or a structured array
        whose field names are the columns).
    missing : {"error", "interpolate", "hold"}
        What a missing sensor value gets (``MISSING_POLICIES``): an InputError at its cell, linear
        interpolation between its sensor's neighbouring rows, or its sensor's last value before it (``hold``;
        ``Table.filled`` counts them).
    ignore_label : bool
        Drop a ``label`` column unread, for a caller without use for ground truth (``mscred detect``): its values
        are not checked and it is no sensor either (``Table.labels`` is None). By default it is read and checked.
    encoding : str, optional
        Text encoding of a CSV file (``"cp1252"``, ``"latin-1"``: files exported by Windows tools); None (the
        default) reads UTF-8, a byte-order mark allowed. Parquet and .npy files ignore it.
    reading : mscred.data.reading.Reading, optional
        How its cells are read beyond the format: the time column under another name than ``timestamp`` (a
        historian's ``"Time"``, read as ``timestamp`` is), text that stands for a missing value (``"Bad"``).
    raw : DataFrame, optional
        The file as ``read_raw_frame`` read it (with ``reading``'s time column), read so instead of the file again.

    Returns
    -------
    Table

    Raises
    ------
    InputError
        Unknown ``encoding``, missing file, unknown format, unreadable or empty table (bytes not of its encoding
        among them), no sensor column, a non-numeric value, a NaN (with ``missing="error"``; a sensor with no value
        at all otherwise) or infinite value, a bad label, or no column ``reading.time_column`` (or a ``timestamp``
        column beside it); the message names the file, and the column and row where it applies.
    """
    if raw is None:
        frame = read_frame(path, encoding=encoding, reading=reading)
    else:   # (the file read already, by read_raw_frame)
        from mscred.data.reading import PLAIN

        frame = (reading or PLAIN).frame(raw, str(Path(path)))
    table = table_from_frame(frame, source=str(Path(path)), missing=missing, ignore_label=ignore_label)
    table.positional = bool(frame.attrs.get(POSITIONAL))
    return table


def is_plain_text(path: str | os.PathLike) -> bool:
    """A .csv, .txt or .tsv file as it is, not compressed: one that can be appended to line by line."""
    return Path(path).suffix.lower() in _CSV


def is_parquet(path: str | os.PathLike) -> bool:
    """A .parquet or .pq file."""
    return Path(path).suffix.lower() in _PARQUET


def read_frame(path: str | os.PathLike, *, npy: bool = True, encoding: Optional[str] = None,
               reading: Optional["Reading"] = None, **csv_options: Any) -> pd.DataFrame:
    """Read a CSV (also .txt/.tsv), Parquet or, with ``npy``, .npy file into a DataFrame, without validating its
    values; every failure is an InputError naming the file. ``encoding``: a CSV's, as :func:`load_table`'s;
    ``reading``: as :func:`load_table`'s (``mscred.data.reading``); ``csv_options`` go to ``pandas.read_csv``.

    :func:`load_table` validates what this returns; ``mscred.evaluation`` reads SCORES.csv (text columns) with it.
    """
    from mscred.data.reading import PLAIN   # (it reads this module's names)

    reading = reading or PLAIN
    return reading.frame(read_raw_frame(path, npy=npy, encoding=encoding, time_name=reading.time_column or TIMESTAMP,
                                        **csv_options), str(Path(path)))


def read_raw_frame(path: str | os.PathLike, *, npy: bool = True, encoding: Optional[str] = None,
                   time_name: str = TIMESTAMP, **csv_options: Any) -> pd.DataFrame:
    """``read_frame``'s file as its format gives it, before a reading (``mscred.data.reading``) is applied:
    ``time_name`` is the column whose times a CSV keeps exactly as written. For a caller that reads one file in
    several ways (``mscred inspect``, leaving out one text column after another) without reading it again."""
    path = Path(path)
    encoding = csv_encoding(encoding)   # (a bad name is refused whatever the file: it is the caller's mistake)
    kinds = ".csv, .parquet or .npy" if npy else ".csv or .parquet"
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a {kinds} file")
    suffix = path.suffix.lower()
    # (pandas infers a CSV's compression from the last suffix)
    if suffix in _CSV or (suffix in _COMPRESSED and Path(path.stem).suffix.lower() in _CSV):
        return _read_csv(path, encoding, time_name=time_name, **csv_options)
    if suffix in _PARQUET:
        return _read_parquet(path)
    if npy and suffix in _NPY:
        return _read_npy(path)
    raise InputError(f"{path}: unknown file type {suffix or '(none)'!r}; expected {kinds}")


def time_option(column: str) -> str:
    """The option that reads ``column`` as the time, as a shell takes it (the CLI's; in Python the ``time_column``
    setting)."""
    return f"--time-column {shlex.quote(column)}"


def time_label(df: pd.DataFrame) -> str:
    """How messages name a frame's time column: ``column 'timestamp'``, or the file's own name for it."""
    name = df.attrs.get(TIME_NAME)
    return f"column '{TIMESTAMP}'" if name is None else f"column '{name}' (read as the time)"


def table_from_frame(df: pd.DataFrame, source: str = "<DataFrame>", missing: str = "error",
                     ignore_label: bool = False) -> Table:
    """Validate a DataFrame as :func:`load_table` does (the estimator's entry point for DataFrames).

    A ``timestamp`` column becomes the index (otherwise the frame's own index is kept when it is not a plain
    RangeIndex); a ``label`` column becomes ``labels``; every other column must be numeric and finite, missing
    values aside with ``missing="interpolate"`` (see :func:`load_table`), and ``ignore_label`` drops a ``label``
    column unread. Rows are reported 1-based in frame order.
    """
    from mscred.data.resample import RESAMPLE, parse_period, resampled

    if missing not in MISSING_POLICIES and missing != KEEP:
        raise InputError(f"missing={missing!r}: choose one of {', '.join(MISSING_POLICIES)}")
    if not isinstance(df, pd.DataFrame):
        if type(df).__module__.startswith("scipy.sparse"):  # (scipy is not imported for this: no dependency)
            raise InputError(f"{source}: a sparse {type(df).__name__}: sparse input is not supported (sensor series "
                             "are dense); pass .toarray() or a DataFrame")
        raise InputError(f"{source}: expected a table (DataFrame), got {type(df).__name__}")
    if df.shape[0] == 0:
        raise InputError(f"{source}: the table has no data rows")
    # Names as a CSV header gives them (stripped), whatever the source: a Parquet file's " a" and "a " were two
    # sensors that no CSV of the same header could match, and "" a sensor named nothing
    columns = [str(c).strip() for c in df.columns]
    if "" in columns:
        raise InputError(f"{source}: column {columns.index('') + 1} has an empty name; name every column")
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        raise InputError(f"{source}: duplicate column name(s): {', '.join(duplicated)}")
    df = df.set_axis(columns, axis=1)
    if ignore_label and LABEL in df.columns:
        # Scoring needs no ground truth: a label column being filled in (empty cells, 'ok'/'fault' notes) refused
        # data that scores fine. Dropped, not kept: it was no sensor at training either.
        df = df.drop(columns=[LABEL])

    times = None   # the order check's integer/float times, for the gap note (largest_time_gap)
    if TIMESTAMP in df.columns:
        where = time_label(df)   # (the file's own name for it, where read under another)
        stamps = df[TIMESTAMP].to_numpy()
        if stamps.dtype == np.float16:  # pandas has no float16 index; float32 holds every float16 exactly
            stamps = stamps.astype(np.float32)
        index = pd.Index(stamps, name=TIMESTAMP)
        bad = np.flatnonzero(pd.isna(index))
        if len(bad):
            raise InputError(f"{source}: {where} row {bad[0] + 1}: missing timestamp")
        # (rows put on a grid may repeat a time: they are in one period, averaged)
        times = check_time_order(index, source, where, repeats=RESAMPLE in df.attrs)
    elif isinstance(df.index, pd.RangeIndex) and df.index.name != TIMESTAMP:
        index = pd.RangeIndex(len(df))
    else:
        # A stored 'timestamp' RangeIndex (a Parquet file of a frame indexed 100..299) is timestamps, not row
        # numbers: as a plain Index, SCORES.csv names it 'timestamp'.
        if isinstance(df.index, pd.MultiIndex):
            raise InputError(f"{source}: the table has a MultiIndex ({', '.join(map(str, df.index.names))}); one "
                             "series a table: select one entity, or reset_index() to make the levels columns")
        index = pd.Index(df.index.to_numpy(), name=TIMESTAMP) if isinstance(df.index, pd.RangeIndex) else df.index
        # Any index kept as the rows' timestamps is ordered as a 'timestamp' column is (a time index stored in a
        # Parquet file; an index of numbers or ids, which once went through shuffled or repeated, unchecked)
        times = check_time_order(index, source, f"column '{TIMESTAMP}'" if index.name == TIMESTAMP else
                                  f"the index{'' if index.name is None else f' {str(index.name)!r}'} (kept as "
                                  "timestamps)")

    labels = _labels(df[LABEL], source) if LABEL in df.columns else None
    sensors = [c for c in df.columns if c not in (TIMESTAMP, LABEL)]
    for name in sensors:  # 'Timestamp' or 'LABEL' would silently be a sensor (epoch seconds: a rising ramp)
        if name.lower() in (TIMESTAMP, LABEL):
            also = f", or give {time_option(name)}" if name.lower() == TIMESTAMP else ""
            raise InputError(f"{source}: column '{name}': the {name.lower()} column must be named "
                             f"'{name.lower()}' (lower case{also}); as written it would be a sensor")
    if not sensors:
        raise InputError(f"{source}: no sensor columns (only '{TIMESTAMP}'/'{LABEL}')")
    period = df.attrs.get(RESAMPLE)   # (a period's missing values are known only on the grid)
    held = tuple(name for name in sensors if name in set(df.attrs.get(HOLD, ())))
    values = np.empty((len(df), len(sensors)), dtype=np.float64)
    for j, col in enumerate(sensors):
        values[:, j] = _numeric_column(df[col], col, source,
                                       allow_missing=missing != "error" or period is not None or col in held)
    _check_time_as_sensor(values, sensors, source)
    if period is not None:
        table = Table(values=values, sensors=sensors, index=index, labels=labels, source=source, held=held)
        return resampled(table, parse_period(period), missing, times)
    # (under "error" only the held sensors may have gaps here: the others' were refused at their cells)
    gaps = np.isnan(values) if missing in FILLING or (held and missing == "error") else None
    time_gap = largest_time_gap(*times[:3]) if times is not None else None
    time_note = times[3] if times is not None else None
    uneven = uneven_steps(*times[:3]) if times is not None else None
    if gaps is None or not gaps.any():
        return Table(values=values, sensors=sensors, index=index, labels=labels, source=source, time_gap=time_gap,
                     time_note=time_note, uneven=uneven, held=held)
    filled = fill_missing(values, gaps, sensors, source, missing, held)
    return Table(values=values, sensors=sensors, index=index, labels=labels, source=source, filled=filled, gaps=gaps,
                 time_gap=time_gap, time_note=time_note, uneven=uneven,
                 filled_by=missing if missing in FILLING else None, held=held)


# Names of a time or row-number column under another name than 'timestamp' (case and '_'/'-'/blanks aside)
_TIME_NAMES = {"time", "date", "datetime", "date_time", "time_stamp", "ts", "epoch", "unix_time", "unixtime",
               "epoch_time", "index"}


def _check_time_as_sensor(values: np.ndarray, sensors: list[str], source: str) -> None:
    """A sensor named like a time ('time', 'Date', 'unix_time', a saved 'index') whose numbers increase on every
    row is a time or row-number column: as a sensor it was a rising ramp, which trained without a word and put every
    later window out of its range at detect (all anomalous, root cause 'time'). 'Timestamp' is refused already."""
    if len(values) < 3:
        return
    for j, name in enumerate(sensors):
        if re.sub(r"[\s_\-]+", "_", name.strip().lower()) in _TIME_NAMES:
            with np.errstate(invalid="ignore"):
                rising = bool((np.diff(values[:, j]) > 0).all())
            if rising:
                raise InputError(f"{source}: column '{name}' holds numbers that increase on every row, a time or row "
                                 f"number rather than a sensor (as a sensor it is a rising ramp, out of the training "
                                 f"range at detect): name it '{TIMESTAMP}' (or give {time_option(name)}) to keep it "
                                 "as the rows' time, or drop it")


def fill_missing(values: np.ndarray, gaps: np.ndarray, sensors: list[str], source: str, how: str,
                 held: Sequence[str] = ()) -> dict[str, int]:
    """Fill the values where ``gaps`` in place, per sensor; the count filled per sensor. ``how`` "interpolate":
    linearly in the row number (the model's windows count rows, not time); "hold": the last present value before
    (a step tag's value until its next record). Either way the first / last present value at the ends. The sensors
    ``held`` are held whatever ``how`` says (for them alone ``how`` may be the policy "error")."""
    filled = {}
    rows = np.arange(len(values))
    for j in np.flatnonzero(gaps.any(axis=0)):
        missing = gaps[:, j]
        if missing.all():
            raise InputError(f"{source}: column '{sensors[j]}': every value is missing; nothing to fill it from")
        present = ~missing
        if how == "hold" or sensors[j] in held:
            # each row's last present row at or before it (the first present one before any)
            last = np.maximum.accumulate(np.where(present, rows, -1))
            values[missing, j] = values[np.where(last < 0, int(np.argmax(present)), last)[missing], j]
        else:
            values[missing, j] = np.interp(rows[missing], rows[present], values[present, j])
        filled[sensors[j]] = int(missing.sum())
    return filled


def check_time_order(index: pd.Index, source: str, label: str = f"column '{TIMESTAMP}'", repeats: bool = False
                      ) -> Optional[tuple[np.ndarray, int, bool, Optional[str]]]:
    """``_time_order``, with cells of several values (a Parquet column or index of lists: unhashable, and no time)
    refused as bad input; looked for only when the check fails on them, so the common path pays nothing.
    ``repeats``: a time may repeat the row before (rows put on a grid: both are in one period)."""
    try:
        return _time_order(index, source, label, repeats)
    except TypeError:
        listed = next((r for r, v in enumerate(index) if pd.api.types.is_list_like(v)), None)
        if listed is None:
            raise
        raise InputError(f"{source}: {label} row {listed + 1}: value {short_repr(index[listed])} is a list of "
                         "values, not one time") from None


def _time_order(index: pd.Index, source: str, label: str, repeats: bool = False
                ) -> Optional[tuple[np.ndarray, int, bool, Optional[str]]]:
    """Timestamps must be strictly increasing: rows are taken in file order (windows, SCORES.csv rows, the
    alignment with a labels file), so an unsorted or repeated time would give silently wrong windows.

    Numbers, date-times and durations are compared as such; integers exactly (epoch nanoseconds are beyond float64's
    2^53, where neighbouring times once read as "repeats the row before"), text that holds numbers as numbers (ids
    '0', '1', ... in a Parquet text column were only checked for repeats, so a reversed file went through). Text
    that does not read as dates at all (ids like 'run-a-001') is only required to be unique; date text is read in
    its first row's format, else as ISO 8601 (a 'T' or a fraction of a second on some rows only), else day first
    (31/01/2024); text that starts as dates and then has a non-date is an error at that row. Day/month text that
    reads increasing both ways (01/02/2024 .. 12/02/2024) is read the way whose steps are more regular
    (``_day_month_reading``).

    Returns the times it compared, for ``largest_time_gap`` (read once: parsing date text a second time for the gap note
    took as long as this check, 0.23 s a million rows): (keys, nanoseconds a key counts, whether they are
    date-times or durations, the note of which way day/month text was read or None), or None for ids and numbers
    written as text.
    """
    where = f"{source}: {label}"
    # an index kept as timestamps may be no time at all (pd.concat of two frames numbered from 0): say how to drop it
    drop = "" if label.startswith("column") else "reset_index(drop=True) if the index is not time"
    if pd.api.types.is_bool_dtype(index.dtype):
        raise InputError(f"{where}: holds true/false values, not times")
    keys: Optional[np.ndarray]
    exact: Optional[np.ndarray] = None     # the values compared exactly where float64 keys cannot tell them apart
    dates = zoned = False                  # date-times (a repeated local hour gets a hint), with a time zone
    tick = 1                               # nanoseconds a date-time key counts (pandas keeps s, ms, us or ns)
    note: Optional[str] = None             # which way day/month date text was read (``_day_month_reading``)
    if pd.api.types.is_integer_dtype(index.dtype):
        keys = index.to_numpy(dtype=np.uint64 if index.dtype.kind == "u" else np.int64)
    elif pd.api.types.is_numeric_dtype(index.dtype):
        keys = index.to_numpy(dtype=np.float64)
    elif pd.api.types.is_datetime64_any_dtype(index.dtype):
        keys = pd.DatetimeIndex(index).asi8                         # in the index's unit (UTC when zoned)
        dates, zoned, tick = True, pd.DatetimeIndex(index).tz is not None, _tick(pd.DatetimeIndex(index))
    elif pd.api.types.is_timedelta64_dtype(index.dtype):
        keys = pd.TimedeltaIndex(index).asi8                        # a duration since the start
        tick = _tick(pd.TimedeltaIndex(index))
    else:
        numbers, texts = np.array([np.nan]), None   # (date text skips the number parse: 2 s a million rows)
        if len(index) and _is_number(str(index[0]).strip()):
            texts = np.asarray(index, dtype=object)   # (once: 0.1 s a million pandas 3 strings)
            # (the nearest floats on any pandas, as the keys must be to round monotonically: ties are all
            # _exact_order sees; coerce_float64 reads the texts as float() does before pandas 3.1)
            numbers = coerce_float64(pd.Series(texts))
            huge = [] if np.isfinite(numbers).all() else [i for i, v in enumerate(texts) if _huge_int(v)]
            if huge:   # (looked for only among non-finite keys: the common path pays no loop)
                raise InputError(f"{where} row {huge[0] + 1}: integer {_shown_int(index[huge[0]])} is beyond "
                                 "float64's range (~1.8e308)")
        if len(numbers) == len(index) and np.isfinite(numbers).all():
            keys, exact = numbers, texts          # numbers as text ('1700000000.0000001')
        elif len(numbers) == len(index) and np.isfinite(numbers[0]):
            # Numbers, then text: pandas read the column as text, and as 'ids' its order went unchecked (a comment
            # line, an 'N/A' among epoch seconds)
            r = int(np.flatnonzero(~np.isfinite(numbers))[0])
            raise InputError(f"{where} row {r + 1}: value {short_repr(index[r])} is not a number like the rows "
                             f"before it{_stray_line_hint(index[r])}")
        else:
            keys, tick, note = _date_keys(index, where)
            dates = keys is not None
            zoned = dates and bool(_ZONE.search(str(index[0]).strip()))
    if keys is None:
        repeated = np.flatnonzero(index.duplicated())
        if len(repeated):
            r = repeated[0]
            raise InputError(f"{where} row {r + 1}: timestamp {short_repr(index[r])} appears twice"
                             + (f" ({drop})" if drop else ""))
        return None
    # (compared, not subtracted: uint64 differences wrap around)
    bad = np.flatnonzero(~(keys[1:] >= keys[:-1]) if repeats and exact is None else ~(keys[1:] > keys[:-1]))
    if exact is not None and len(bad):
        # float64 rounds monotonically, so only its ties can hide an increase: decide those on the exact text
        bad, equal = _exact_order(exact, bad)
    else:
        equal = bool(len(bad)) and keys[bad[0] + 1] == keys[bad[0]]
    if len(bad):
        r = int(bad[0]) + 1
        what = "repeats the row before" if equal else f"is earlier than the row before's {short_repr(index[r - 1])}"
        hint = ""
        if dates and not zoned and 0 <= (int(keys[r - 1]) - int(keys[r])) * tick <= 3600 * 10 ** 9:
            hint = ("; local times without a UTC offset repeat an hour when the clocks go back: give their zone "
                    "(--time-zone Europe/Berlin), or write the times in UTC or with their offset (+01:00)")
        raise InputError(f"{where} row {r + 1}: timestamp {short_repr(index[r])} {what}; rows must be in increasing "
                         f"time order (sort the table by time{'; or ' + drop if drop else ''}){hint}")
    if exact is not None:
        return None   # (numbers written as text: no gap note, as before the times were handed on)
    return keys, tick, dates or pd.api.types.is_timedelta64_dtype(index.dtype), note


def _exact_number(value: Any):
    """A number written as text, exactly (Decimal); as float64 where Decimal does not read it ('1_000')."""
    from decimal import Decimal, InvalidOperation

    try:
        return Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return float(pd.to_numeric(str(value).strip()))


@functools.lru_cache(maxsize=None)
def pandas_rounds_floats() -> bool:
    """Whether pandas reads decimal text as the nearest float64 (``read_csv``, ``to_numeric``), as it does from 3.1
    on (fast_float, pandas-dev/pandas#64432). Before, its default converter could be a unit in the last place off at
    17 digits: '1700000000.0010273' read as 1700000000.001027 (pandas 3.0.6). The order check relies on float64 keys
    that round monotonically (only their ties are compared exactly), and a float timestamp column one unit off its
    text read as "changed by float64"."""
    sample = "1700000000.0010273"
    return bool(pd.to_numeric(pd.Series([sample])).iloc[0] == float(sample))


def float_read_options(engine: Optional[str] = None) -> dict[str, Any]:
    """``pandas.read_csv`` options that read decimal text as its nearest float64 on every supported pandas: before
    3.1 the C parser's default converter can be a unit in the last place off (``pandas_rounds_floats``), so the
    same CSV read to other floats than on pandas 3.1 (and than the values written); its "round_trip" converter is
    Python's, correctly rounded. No option from pandas 3.1 on (it is deprecated there), nor for the python engine
    (which refuses it: ``_csv_call`` corrects that engine's floats afterwards)."""
    return {"float_precision": "round_trip"} if engine != "python" and not pandas_rounds_floats() else {}


def _nearest_floats(texts: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """``numbers`` (pandas' reading of ``texts``) with every finite one replaced by Python's nearest float64 of its
    text (for a pandas that does not round so: ``pandas_rounds_floats``); what pandas did not read stays NaN, and a
    text Python does not read keeps pandas' number.

    Plain decimal texts are read by ``_plain_floats`` at once; only the others (none, in a column of times as
    written), or every text where pyarrow is missing, go through ``float`` one by one (0.55 s a million rows, 0.22 s
    at once: benchmarks/results/io_nearest_floats)."""
    out = numbers.copy()
    rows = np.flatnonzero(np.isfinite(numbers))
    read = _plain_floats(texts[rows])
    if read is not None:
        plain = ~np.isnan(read)
        out[rows[plain]] = read[plain]
        rows = rows[~plain]
    for r in rows.tolist():
        try:
            out[r] = float(str(texts[r]).strip())
        except ValueError:
            pass
    return out


# A decimal as Python's float() and pyarrow's cast read it alike (ASCII digits only: float() also takes '1_000' and
# other scripts' digits, which pyarrow refuses); RE2 syntax, $ being the end of the text
_PLAIN_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
# The blanks that str.strip and float() both take off (str.strip also takes \x1c-\x1f, which float() keeps)
_ASCII_BLANKS = " \t\n\r\x0b\x0c"


def _plain_floats(texts: np.ndarray) -> Optional[np.ndarray]:
    """Python's ``float(str(t).strip())`` of each of ``texts`` that is a plain decimal after ASCII blanks
    (``_PLAIN_FLOAT``), NaN for the others; None without pyarrow.

    pyarrow's cast reads decimal text with fast_float (vendored since Arrow 3.0: ARROW-10328), which gives the
    nearest float64 (ties to even) as Python's float() does, at any number of digits and in the subnormal range
    (tests/test_io_nearest_floats.py compares the two on 17-digit values and on half-ulp midpoints written out in
    full and a digit off them). numpy's text-to-float casts were no way out: they hand every value to Python's
    parser, which is most of the loop's time (0.36 s a million)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    if pd.api.types.infer_dtype(texts, skipna=False) != "string":   # (Decimals, numbers in an object column)
        texts = np.array(list(map(str, texts)), dtype=object)
    out = np.full(len(texts), np.nan)
    try:
        strings = pc.utf8_trim(pa.array(texts, type=pa.string()), _ASCII_BLANKS)
        plain = pc.match_substring_regex(strings, _PLAIN_FLOAT).to_numpy(zero_copy_only=False)
        out[plain] = pc.cast(pc.filter(strings, plain), pa.float64()).to_numpy()
    except (TypeError, ValueError, pa.ArrowException):   # (a lone surrogate is no UTF-8): float() reads them all
        return None
    return out


def _exact_order(texts: np.ndarray, bad: np.ndarray) -> tuple[np.ndarray, bool]:
    """Of the rows ``bad`` (where float64 does not put ``texts[r + 1]`` after ``texts[r]``), those where the numbers
    written ``texts`` do not increase exactly either, and whether the first of them repeats the row before.

    The answer of comparing each pair as two ``_exact_number``s, which took 3 to 7 s a million rows (epoch seconds to
    the nanosecond tie in float64 on nearly every row: benchmarks/results/io_fine_times): pairs of decimal texts are
    compared on their ``_decimal_keys``, and only the others as ``_exact_number``s, in row order (an error raises
    where it did)."""
    involved = np.zeros(len(texts), dtype=bool)
    involved[bad] = True
    involved[bad + 1] = True
    rows = np.flatnonzero(involved)
    at = np.cumsum(involved) - 1                                   # a row's place in ``rows``
    sign, adj, digits, fast = _decimal_keys(texts[rows])
    a, b = at[bad], at[bad + 1]
    order = np.zeros(len(bad), dtype=np.int8)                      # sign(texts[r + 1] - texts[r]), fast pairs
    for start in range(0, len(bad), _KEY_BLOCK):                   # (the gathered keys are pairs x width bytes)
        i, j = a[start:start + _KEY_BLOCK], b[start:start + _KEY_BLOCK]
        di, dj = digits[i], digits[j]
        size = np.sign(adj[j] - adj[i]).astype(np.int8)            # the first digits' powers of ten, then the digits
        size = np.where(size != 0, size, (dj > di).astype(np.int8) - (dj < di))
        si, sj = sign[i], sign[j]
        order[start:start + _KEY_BLOCK] = np.where(si != sj, np.sign(sj - si), si * size)
    later = order > 0
    for k in np.flatnonzero(~(fast[a] & fast[b])).tolist():
        later[k] = _exact_number(texts[bad[k] + 1]) > _exact_number(texts[bad[k]])
    first = np.flatnonzero(~later)
    if not len(first):
        return bad[:0], False
    k, r = int(first[0]), int(bad[first[0]])
    equal = order[k] == 0 if fast[a[k]] and fast[b[k]] else _exact_number(texts[r + 1]) == _exact_number(texts[r])
    return bad[~later], bool(equal)


# Texts longer than this are left to ``_exact_number`` (a block's keys are a rows x longest-text matrix)
_KEY_CHARS = 64
_KEY_BLOCK = 1 << 16
# Classes of a decimal text's characters by code; blanks are str.strip's, which ``_exact_number`` applies
_PAD, _OTHER, _DIGIT, _SIGN, _DOT, _EXP, _BLANK = range(7)
_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_CLASS[0] = _PAD                                   # an S array's padding (a NUL in a text is told by its length)
_CLASS[[ord(c) for c in "0123456789"]] = _DIGIT
_CLASS[[ord("+"), ord("-")]] = _SIGN
_CLASS[ord(".")] = _DOT
_CLASS[[ord("e"), ord("E")]] = _EXP
_CLASS[[i for i in range(128) if chr(i).isspace()]] = _BLANK


def _decimal_keys(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact order keys of the numbers written ``values``, read as ``_exact_number`` reads them (``str(value)``,
    stripped), for the texts that are decimals: ``[+-]digits[.[digits]][(e|E)[+-]digits]`` or ``[+-].digits[...]``
    in ASCII, of at most ``_KEY_CHARS`` characters and 15 exponent digits (``fast``); the others (``1_000``,
    ``Infinity``, non-ASCII digits) are left to ``_exact_number``.

    Returns ``sign`` (int8 -1, 0 or 1; -0 is 0), ``adj`` (int64: the power of ten of the first significant digit,
    the value being 0.d1d2... x 10^adj), ``digits`` (the significant digits left-aligned, padded with '0', as bytes
    of one width) and ``fast`` (bool): of two texts of one sign, the larger ``adj``, then the larger ``digits`` is
    the larger magnitude.
    """
    if not set(map(type, values)) <= {str}:
        values = np.array(list(map(str, values)), dtype=object)
    lens = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    width = max(1, min(int(lens.max(initial=0)), _KEY_CHARS))
    # (numpy cuts a longer text to the width and drops trailing NULs: the length checks below tell both)
    try:
        ascii_ = np.asarray(values, dtype=object).astype(f"S{width}")
    except UnicodeEncodeError:   # a non-ASCII text, which no key reads: made empty here, its length refuses it
        ascii_ = np.array([t if t.isascii() else "" for t in values], dtype=object).astype(f"S{width}")
    codes = ascii_.view(np.uint8).reshape(-1, width)
    sign = np.zeros(len(values), dtype=np.int8)
    adj = np.zeros(len(values), dtype=np.int64)
    digits = np.zeros(len(values), dtype=f"S{width}")
    fast = np.zeros(len(values), dtype=bool)
    for start in range(0, len(values), _KEY_BLOCK):
        part = slice(start, start + _KEY_BLOCK)
        sign[part], adj[part], digits[part], fast[part] = _plain_keys(ascii_[part], codes[part], lens[part])
        rest = start + np.flatnonzero(~fast[part])
        if len(rest):
            sign[rest], adj[rest], digits[rest], fast[rest] = _other_keys(codes[rest], lens[rest])
    return sign, adj, digits, fast


def _plain_keys(text: np.ndarray, codes: np.ndarray, lens: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_decimal_keys`` of the texts written ``[+-]digits[.[digits]]`` or ``[+-].digits`` (as times are: no blank, no
    exponent), from whole-text string operations; the fourth array says which ones are. ``text``: the texts as bytes,
    ``codes`` the same as a (rows, width) uint8 matrix, ``lens`` their lengths as str."""
    width = codes.shape[1]
    signed = (codes[:, 0] == ord("+")) | (codes[:, 0] == ord("-"))
    dots = np.char.count(text, b".")
    numeric = ((codes - ord("0")) < 10) | (codes == ord("."))       # (uint8: below '0' wraps round to >= 208)
    plain = ((numeric.sum(axis=1) + signed == lens) & (dots <= 1) & (lens - signed - dots >= 1))
    point = np.char.find(text, b".")
    point = np.where(point < 0, lens, point)                        # the '.', or where the integer part ends
    # A sign read as a leading '0' (the magnitude's), then the '.' taken out: the mantissa's digits
    body = codes.copy()
    body[signed, 0] = ord("0")
    past = np.arange(width) >= point[:, None]
    whole = np.zeros_like(body)
    whole[:, :-1] = np.where(past[:, :-1], body[:, 1:], body[:, :-1])
    whole[:, -1] = np.where(past[:, -1], 0, body[:, -1])
    sig = np.char.lstrip(whole.view(f"S{width}").ravel(), b"0")
    nsig = np.char.str_len(sig)
    sign = np.where(nsig == 0, 0, np.where(codes[:, 0] == ord("-"), -1, 1)).astype(np.int8)
    adj = point - (lens - (dots > 0) - nsig)                        # integer digits less leading zeros
    return sign, adj, np.char.ljust(sig, width, b"0").astype(f"S{width}"), plain


def _other_keys(codes: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_decimal_keys`` of the texts ``_plain_keys`` does not read (blanks about them, an exponent; or no decimal
    at all: the fourth array says which are), from (rows, width) uint8 ``codes`` and their ``lens``: the blanks and
    the exponent are taken off here, and the mantissa left to ``_plain_keys``."""
    width = codes.shape[1]
    col = np.arange(width)
    rows = np.arange(len(codes))
    cls = _CLASS[codes]
    ok = (lens <= width) & ((cls != _PAD).sum(axis=1) == lens)
    body = (cls != _PAD) & (cls != _BLANK)                           # str.strip keeps first..last
    ok &= body.any(axis=1)
    first = body.argmax(axis=1)
    last = width - 1 - body[:, ::-1].argmax(axis=1)
    # (any other character, a blank inside included, is refused by the exponent's check or the mantissa's)
    exps = cls == _EXP
    e = exps.any(axis=1)
    epos = np.where(e, exps.argmax(axis=1), last + 1)                 # the first 'e', or past the end
    # the exponent: an optional sign, then 1 to 15 digits (at most 10^15: exact in int64, with the mantissa's)
    after_e = np.minimum(epos + 1, width - 1)
    exp_first = epos + 1 + (e & (cls[rows, after_e] == _SIGN))
    ok &= ~e | ((exp_first <= last) & (last - exp_first < 15))
    exponent = (col >= exp_first[:, None]) & (col <= last[:, None])
    ok &= ~(exponent & (cls != _DIGIT)).any(axis=1)
    power = np.zeros(len(rows), dtype=np.int64)
    has_exp = np.flatnonzero(ok & e)
    if len(has_exp):
        for k in range(int((last - exp_first)[has_exp].max()) + 1):   # its digits from the last one
            at = last[has_exp] - k
            digit = codes[has_exp, np.maximum(at, 0)].astype(np.int64) - ord("0")
            power[has_exp] += np.where(at >= exp_first[has_exp], digit * 10 ** k, 0)
        power[has_exp] *= np.where(codes[has_exp, after_e[has_exp]] == ord("-"), -1, 1)
    # The mantissa (first..the 'e') as a text of its own: blanks before it, NULs after it, the blanks stripped
    mantissa = np.where(col < first[:, None], ord(" "), np.where(col < epos[:, None], codes, 0)).astype(np.uint8)
    text = np.char.lstrip(np.ascontiguousarray(mantissa).view(f"S{width}").ravel(), b" ").astype(f"S{width}")
    sign, adj, digits, plain = _plain_keys(text, text.view(np.uint8).reshape(-1, width), epos - first)
    return sign, adj + power, digits, ok & plain


# A date text's time zone: Z or an offset (+01:00, -0500) at its end
_ZONE = re.compile(r"(?:Z|[+-]\d\d:?\d\d)$", re.IGNORECASE)


def _tick(times: pd.DatetimeIndex | pd.TimedeltaIndex) -> int:
    """Nanoseconds one unit of ``times.asi8`` counts (pandas 3 keeps date-times in s, ms, us or ns)."""
    return {"s": 10 ** 9, "ms": 10 ** 6, "us": 10 ** 3}.get(str(getattr(times, "unit", "ns")), 1)


def date_text_times(index: pd.Index, where: str) -> Optional[tuple[np.ndarray, int, bool]]:
    """Date text's times as the order check reads them (``_date_keys``: the first row's format, else ISO 8601, else
    day first; day/month text weighed both ways): (integer keys, the nanoseconds a key counts, whether the text
    carries a time zone -- the keys are then UTC, else the wall times as if UTC); None for text that is no date
    (ids, numbers written as text). ``mscred.data.time_zone`` places wall times in a zone with it."""
    if len(index) and _is_number(str(index[0]).strip()):
        return None
    keys, tick, _ = _date_keys(index, where)
    if keys is None:
        return None
    return keys, tick, bool(_ZONE.search(str(index[0]).strip()))


def _date_keys(index: pd.Index, where: str) -> tuple[Optional[np.ndarray], int, Optional[str]]:
    """Integer times (UTC) of date text and the nanoseconds of their unit (``_tick``), for the order check; None when
    the first value is no date (ids); and the note of ``_day_month_reading`` (or None). The first
    reading of the text that gives a date on every row and increasing times wins: the first row's format (pandas'),
    ISO 8601 in any of its forms, day first; a reading with every row a date but not increasing comes next (its
    order error is reported), and a non-date is reported at the row where the first-row format stops. The first
    row's format of day/month text (01/02/2024) is weighed against the same format with day and month swapped."""
    parsed = parse_times(index)
    missing = np.flatnonzero(parsed.isna())
    if len(missing) and missing[0] == 0:
        return None, 1, None          # not dates: opaque labels, which must only be unique
    complete = [(parsed.asi8, _tick(parsed))] if not len(missing) else []
    if len(complete) and (np.diff(complete[0][0]) > 0).all():
        return _day_month_reading(index, parsed, where)
    zoned = np.array([bool(_ZONE.search(str(v).strip())) for v in index])
    if zoned.any() and not zoned.all():
        # (read with utc=True, a row without a zone among zoned ones would silently be taken as UTC)
        r = int(np.flatnonzero(zoned != zoned[0])[0])
        raise InputError(f"{where} row {r + 1}: value {short_repr(index[r])} "
                         f"{'has no' if zoned[0] else 'has a'} time zone, unlike row 1 {short_repr(index[0])}")
    for options in ({"format": "ISO8601"}, {"dayfirst": True}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                other = pd.DatetimeIndex(pd.to_datetime(index, errors="coerce", utc=True, **options))
            except (ValueError, TypeError, OverflowError):
                continue
        if not other.isna().any():
            if (np.diff(other.asi8) > 0).all():
                return other.asi8, _tick(other), None
            complete.append((other.asi8, _tick(other)))
    if complete:
        return (*complete[0], None)
    r = missing[0]
    raise InputError(f"{where} row {r + 1}: value {short_repr(index[r])} is not a date/time like the rows before it"
                     f"{_stray_line_hint(index[r])}")


# Day/month date text whose day and month could swap: 01/02/2024, 1.2.2024 13:00, 01-02-2024 (not ISO year first)
_DAY_MONTH = re.compile(r"(\d{1,2})([/.-])(\d{1,2})\2(\d{4})(?!\d)")


def _day_month_reading(index: pd.Index, parsed: pd.DatetimeIndex, where: str
                       ) -> tuple[np.ndarray, int, Optional[str]]:
    """``_date_keys``' result for date text read increasing in its first row's format (``parsed``, pandas' reading).

    pandas reads 01/02/2024 month first; hourly rows from 01/02/2024 to 12/02/2024 written day first read increasing
    that way too (2 January, then 2 February at the next day), and a month-first file can read day first the same
    way. Where the text is day/month numbers and every row reads with day and month swapped as well (cheap checks
    first: the first row's form, every day 12 or less), the swapped reading is tried; when it too is increasing, the
    reading with the smaller ratio of its largest to its median step is kept (then of its largest to its smallest;
    pandas' on a tie), and the note says which was taken. Otherwise pandas' reading, and no note."""
    kept = parsed.asi8, _tick(parsed), None
    first = str(index[0]).strip()
    match = _DAY_MONTH.match(first)
    if match is None or len(parsed) < 3:
        return kept
    from pandas.tseries.api import guess_datetime_format

    fmt = guess_datetime_format(first)   # (the format pandas read every row in)
    if fmt is None or fmt.count("%d") != 1 or fmt.count("%m") != 1 or not (parsed.day <= 12).all():
        return kept
    day_first = fmt.index("%d") < fmt.index("%m")
    swapped = re.sub("%[dm]", lambda m: "%m" if m.group() == "%d" else "%d", fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            other = pd.DatetimeIndex(pd.to_datetime(index, format=swapped, errors="coerce", utc=True))
        except (ValueError, TypeError, OverflowError):
            return kept
    if other.isna().any() or not (np.diff(other.asi8) > 0).all() or other.equals(parsed):
        return kept   # (equal: every row's day is its month, 01/01/2024 hour by hour)

    def steps(times: pd.DatetimeIndex) -> tuple[tuple[float, float], float]:
        # ((largest step / median step, then largest / smallest: daily 01/01 .. 01/12 day first has steps of 29 to
        # 31 days, as regular by the median), largest step in ns)
        ns = np.diff(times.asi8.astype(np.float64)) * _tick(times)
        return (float(ns.max() / np.median(ns)), float(ns.max() / ns.min())), float(ns.max())

    (ratio, largest), (other_ratio, other_largest) = steps(parsed), steps(other)
    take_other = other_ratio < ratio
    if take_other:
        day_first = not day_first
        ratio, largest, other_ratio, other_largest = other_ratio, other_largest, ratio, largest
    day, month = (match.group(1), match.group(3)) if day_first else (match.group(3), match.group(1))
    names = ("day", "month") if day_first else ("month", "day")

    def shown(step: float) -> str:
        return str(pd.Timedelta(int(round(step)), unit="ns"))

    note = (f"{where}: {short_repr(first)} read {names[0]} first ({int(day)} {calendar.month_name[int(month)]} "
            f"{match.group(4)}): {names[1]} first gave steps of up to {shown(other_largest)}")
    note += (f", {names[0]} first of up to {shown(largest)}" if other_ratio > ratio else
             f" as regular; write the dates as ISO 8601 ({match.group(4)}-{int(month):02d}-{int(day):02d}) to be sure")
    return (other.asi8, _tick(other), note) if take_other else (parsed.asi8, _tick(parsed), note)


def _stray_line_hint(value: Any) -> str:
    """What a non-time among times most likely is, when it shows: a comment line, a second header line or a
    byte-order mark (two exports joined with ``cat``)."""
    text = str(value).strip()
    if text.startswith("#"):
        return " (a comment line? remove it)"
    if text.lstrip("\ufeff") == TIMESTAMP:
        return " (a second header line: two files joined? remove it)"
    if "\ufeff" in text:
        return " (a byte-order mark inside the file: two files joined? remove it)"
    return ""


def largest_time_gap(keys: np.ndarray, tick: int, duration: bool, factor: float = 10.0, at: Optional[int] = None
                     ) -> Optional[tuple[int, str, str]]:
    """(1-based row, its step from the row before, the usual (median) step), as text, of the largest step between
    consecutive times ``keys`` (``check_time_order``'s: ``tick`` nanoseconds a unit; ``duration``: date-times or
    durations, shown as durations) when it is more than ``factor`` usual steps; None for an even series. The
    model's windows count rows, not time: a window over a gap (a stop of the plant, a historian outage) joins the
    two sides as if adjacent. ``at`` (0-based row) judges the step into that row instead of the largest."""
    if len(keys) < 3:
        return None
    steps = np.diff(keys.astype(np.float64)) * tick
    usual = float(np.median(steps))
    r = int(np.argmax(steps)) if at is None else at - 1
    if not usual > 0 or not steps[r] > factor * usual:
        return None

    def shown(step: float) -> str:
        return duration_text(step) if duration else f"{step:g}"

    return r + 2, shown(steps[r]), shown(usual)


def uneven_steps(keys: np.ndarray, tick: int, duration: bool, ratio: float = 4.0, least: int = 20
                 ) -> Optional[tuple[str, str, str]]:
    """(10th percentile, median, 90th percentile) of the steps between consecutive times ``keys`` (as
    ``largest_time_gap`` takes them), as text, where the 90th is more than ``ratio`` times the 10th over at least
    ``least`` steps: rows that are not evenly spaced (a historian's changes-only records, a long table's times), whose
    windows of so many rows span times that vary as much; None for an even series or a logger's jitter."""
    if len(keys) <= least:
        return None
    steps = np.diff(keys.astype(np.float64)) * tick
    low, middle, high = np.percentile(steps, [10, 50, 90])
    if not (low > 0 and high > ratio * low):
        return None

    def shown(step: float) -> str:
        return duration_text(step) if duration else f"{step:g}"

    return shown(low), shown(middle), shown(high)


def duration_text(ns: float) -> str:
    """A duration of ``ns`` nanoseconds as a note says it: ``2 d 3 h``, ``1 h 5 min``, ``29 s``, ``1.5 s``, ``250 ms``
    (the two largest units, what is below them dropped; under a second, ms, us or ns)."""
    ns = int(round(ns))
    if ns < 10 ** 9:
        return f"{ns / 1e6:.3g} ms" if ns >= 10 ** 6 else f"{ns / 1e3:.3g} us" if ns >= 10 ** 3 else f"{ns} ns"
    units = [("d", 86_400 * 10 ** 9), ("h", 3_600 * 10 ** 9), ("min", 60 * 10 ** 9), ("s", 10 ** 9)]
    parts = []
    for name, size in units:
        if ns >= size or parts:
            count, ns = divmod(ns, size)
            if name == "s" and not parts:   # (seconds alone keep their fraction: 1.5 s)
                parts.append(f"{count + ns / 1e9:.3g} s")
            elif count:
                parts.append(f"{count} {name}")
            if len(parts) == 2 or (parts and name == "s"):
                break
    return " ".join(parts[:2])


def short_repr(value: Any, limit: int = 40) -> str:
    """A value for a message: NumPy scalars as plain Python (2, not np.int64(2)), long text cut."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (pd.Timestamp, pd.Timedelta)):
        value = str(value)
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _numeric_column(series: pd.Series, col: str, source: str, allow_missing: bool = False) -> np.ndarray:
    """A column as finite float64 (NaN where missing, with ``allow_missing``), or InputError at its first bad value
    (1-based row)."""
    if pd.api.types.is_complex_dtype(series.dtype):
        raise InputError(f"{source}: column '{col}': complex numbers ({series.dtype}); expected real numbers")
    if pd.api.types.is_datetime64_any_dtype(series.dtype) or pd.api.types.is_timedelta64_dtype(series.dtype):
        raise InputError(f"{source}: column '{col}': holds dates/times ({series.dtype}), not sensor values; name it "
                         f"'{TIMESTAMP}' if it is the time, or give {time_option(col)}")
    if pd.api.types.is_bool_dtype(series.dtype):
        numbers = series.to_numpy(dtype=np.float64)
    elif pd.api.types.is_integer_dtype(series.dtype) and len(series) and _beyond_float64(series):
        row = _beyond_float64(series) - 1
        raise InputError(f"{source}: column '{col}' {_row(series, row)}: integer {series.iloc[row]} is beyond 2^53, "
                         "where float64 (the model's input) no longer tells neighbouring integers apart: subtract "
                         "an offset or scale the column first (an epoch time in ns belongs in 'timestamp')")
    elif pd.api.types.is_numeric_dtype(series.dtype):
        numbers = series.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        numbers = coerce_float64(series)
        # A value that was present but did not parse is a non-number; a missing one is reported below as missing.
        unparsed = np.isnan(numbers) & ~pd.isna(series).to_numpy()
        if unparsed.any():
            row = int(np.flatnonzero(unparsed)[0])
            hint, text = "", str(series.iloc[row]).strip()
            if not pd.isna(pd.to_datetime(text, errors="coerce", format="ISO8601")):
                hint = f" (a date/time: name the time column '{TIMESTAMP}', or give {time_option(col)})"
            elif re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?", text) and "." in text:
                hint = " (a thousands separator? save the numbers without it)"
            elif _is_number(text.replace(",", ".", 1)) and text.count(",") == 1:
                # (a column of decimal commas alone is read as such where ',' is not the separator: here the
                # column mixes them with points, or the file is ','-separated, where "1,234" may be a thousand)
                hint = " (a decimal comma? save the file with '.' as the decimal separator)"
            elif col != LABEL and re.search(r"[^\W\d_]", text) and len(text) <= 40 and "\n" not in text:
                # (a word where a value failed: a historian's state, 'Bad', 'I/O Timeout', 'offline')
                hint = (f" (a state for a failed value? --na-value {shlex.quote(text)} reads it as missing; in Python "
                        f"na_values=[{text!r}])")
                if not (~np.isnan(numbers)).any():
                    # (no number in the whole column: maybe a name, a unit, an ID -- or every value of a short
                    # chunk failed, as a feed's one line can)
                    from mscred.data.states import suggested_states   # (which imports this module)

                    states = suggested_states(series)
                    spec = f"{str(col).strip()}={','.join(states)}"
                    coded = f"a digital tag's states? --states {shlex.quote(spec)} reads them as numbers; " \
                        if states else ""
                    hint = (f" (a text column, no number in it? only '{TIMESTAMP}' and '{LABEL}' may hold text: "
                            f"--drop-columns {shlex.quote(str(col))} leaves it out; {coded}or {hint[2:]}")
            message = (f"{source}: column '{col}' {_row(series, row)}: value {short_repr(series.iloc[row])} is not a "
                       f"number{hint}")
            if hint.startswith(" (a text column"):   # (words, and no number in the whole column)
                raise TextColumnError(message, str(col).strip())
            raise InputError(message)
    bad = np.isinf(numbers) if allow_missing else ~np.isfinite(numbers)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        # The hint only where the interpolate policy would fill the gap (sensor columns; not the label), named for
        # both callers: the CLI's option and the estimator's argument.
        hint = "" if col == LABEL else '; --missing interpolate (in Python missing="interpolate") fills gaps'
        what = (f"missing value (NaN{hint})" if np.isnan(numbers[row])
                else f"integer {_shown_int(series.iloc[row])} is beyond float64's range (~1.8e308)"
                if _huge_int(series.iloc[row]) else f"value {numbers[row]} is not finite")
        raise InputError(f"{source}: column '{col}' {_row(series, row)}: {what}")
    if np.isnan(numbers).all():
        return numbers  # all missing: the caller says so
    with np.errstate(over="ignore"):
        span = np.nanmax(numbers) - np.nanmin(numbers)
    if not np.isfinite(span):   # min-max scaling would divide by inf and turn the whole column into NaN
        lo, hi = int(np.nanargmin(numbers)), int(np.nanargmax(numbers))
        raise InputError(f"{source}: column '{col}': values from {numbers[lo]:g} (row {lo + 1}) to {numbers[hi]:g} "
                         f"(row {hi + 1}) span more than a float64 holds")
    return numbers


def _beyond_float64(series: pd.Series) -> int:
    """1 + the position of an integer column's first value beyond 2^53 in magnitude (float64 rounds there: 2^63 + 100
    .. 2^63 + 265 all read as one value, a 'constant' sensor), or 0 when none is."""
    limit = 2 ** 53
    beyond = series.gt(limit) if series.dtype.kind == "u" else (series.gt(limit) | series.lt(-limit))
    hits = np.flatnonzero(beyond.fillna(False).to_numpy(dtype=bool))
    return int(hits[0]) + 1 if len(hits) else 0


def _row(series: pd.Series, position: int) -> str:
    """'row N' (1-based, as a file's data rows count) of ``series``; for a DataFrame passed in Python whose index is
    not 0, 1, 2, ... also its index label (the NaN of ``test.loc[850]`` once read "row 101" and nothing else)."""
    index = series.index
    plain = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
    if index.name == ROW_TIME:   # (a long table's: its rows are times, not lines of the file)
        return f"row {position + 1} (time {short_repr(index[position])})"
    return f"row {position + 1}" if plain else f"row {position + 1} (index {short_repr(index[position])})"


def _labels(series: pd.Series, source: str) -> np.ndarray:
    """The label column as int64 0/1, or InputError at its first bad value."""
    numbers = _numeric_column(series, LABEL, source)
    bad = (numbers != 0) & (numbers != 1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{source}: column '{LABEL}' {_row(series, row)}: label {short_repr(series.iloc[row])} "
                         "is not 0 or 1")
    return numbers.astype(np.int64)


def csv_encoding(encoding: Optional[str]) -> str:
    """The codec a CSV is read with: ``"utf-8-sig"`` for None, else ``encoding`` if Python decodes text with it
    (InputError naming it otherwise)."""
    if encoding is None:
        return _DEFAULT_ENCODING
    try:
        name = codecs.lookup(encoding).name
        # lookup also finds bytes-to-bytes codecs ('base64', 'zlib'), which decode no text: str() of bytes refuses
        # them (b"", whose decode returns "" unlooked-up, would not)
        str(b" ", name, "replace")
    except (LookupError, TypeError):
        raise InputError(f"unknown text encoding {short_repr(encoding)} (e.g. utf-8, cp1252, latin-1)") from None
    # An explicit UTF-8 still allows a byte-order mark, as the default does (it would end up in the first name).
    return _DEFAULT_ENCODING if name == "utf-8" else name


# utf-8-sig drops a byte-order mark (Excel's "CSV UTF-8"); the python engine would keep it in the first name,
# turning '\ufefftimestamp' into a sensor.
_DEFAULT_ENCODING = "utf-8-sig"


def _read_csv(path: Path, encoding: str = _DEFAULT_ENCODING, time_name: str = TIMESTAMP,
              **options: Any) -> pd.DataFrame:
    # The separator is sniffed (",", ";", tab, "|" or blanks: _sniffed) for .txt/.tsv, and for a .csv whose header
    # holds ';', tab or '|' and no ',' (read with ',' first, one cell written 1,5 in a ';'-separated export split its
    # line into two fields and failed the read before the retry below); other .csv files take the fast C parser.
    text_suffix = Path(path.stem).suffix.lower() if path.suffix.lower() in _COMPRESSED else path.suffix.lower()
    sample = _sample(path, encoding)   # (read once: the header check and the sniffer both look at it)
    kwargs: dict[str, Any] = _sniffed(sample) if text_suffix != ".csv" or _other_separator_header(sample) else {}
    kwargs["encoding"] = encoding
    kwargs.update(options)
    df = _csv_call(path, **kwargs)
    if df.shape[1] == 1 and "sep" not in options and (any(c in str(df.columns[0]) for c in ";\t|")
                                                      or _blank_separated(df)):
        # A ';'-separated export (a European spreadsheet) parsed with ',' lands in one column named
        # 'a;b;c', a blank-separated one (numpy.savetxt, fixed-width printouts) in one named 'a b c' holding
        # '0 1.5 2.5': read it again with the separator sniffed, as for .txt.
        kwargs = {**kwargs, **_sniffed(sample)}
        df = _csv_call(path, **kwargs)
    if df.shape[1] == 0:
        raise InputError(f"{path}: the file has no columns")
    _check_header(path, df, kwargs)
    if kwargs.get("sep") not in (None, ","):   # (None: pandas' own sniffing, which may have found ',')
        df = _decimal_comma_columns(df, time_name)
    if time_name in df.columns and pd.api.types.is_float_dtype(df[time_name].dtype):
        df = _exact_times(path, df, kwargs, time_name)
    # Spreadsheet exports pad names ('pump_1 , pump_2'): the padding is invisible in messages and in the model.
    return df.set_axis([c.strip() if isinstance(c, str) else c for c in df.columns], axis=1)


# A number written with a decimal comma, as a European spreadsheet writes it ("-1,5", "2,", ",5", "1,5e-3"), or an
# integer; ASCII blanks about it allowed. One comma at most: "1,234,567" is a thousands separator, never read so.
_DECIMAL_COMMA = re.compile(r"[ \t]*[+-]?(\d+,?\d*|,\d+)([eE][+-]?\d+)?[ \t]*")


def _decimal_comma_columns(df: pd.DataFrame, time_name: str = TIMESTAMP) -> pd.DataFrame:
    """``df`` with each text column whose every value is a decimal-comma number (``_DECIMAL_COMMA``; at least one
    with its comma) rewritten with decimal points, for the readers downstream to read as any decimal text. Cells
    without a digit (a historian's state where a value failed: ``Bad``, ``I/O Timeout``, ``-``) are left as they
    are and do not stop their column's numbers being read: ``--na-value`` makes them missing, or they are refused
    at their cell as any word is.

    Only for tables separated by something other than ',' (``_read_csv``): there the comma can only be the decimal
    separator (Excel writes ';'-separated files with it where the locale's decimal mark is ','), while in a
    ','-separated file a quoted "1,234" is a thousands separator's as often. A column holding both "1,5" and "2.5"
    is left as it is and refused downstream at its first decimal comma: which mark means what is then a guess."""
    out = df
    for position, col in enumerate(df.columns):
        series = df.iloc[:, position]
        if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_datetime64_any_dtype(series.dtype):
            continue
        present = series[~pd.isna(series)]   # (read_csv's text columns hold str and missing values only)
        if not len(present):
            continue
        texts = present.astype(str).str
        is_number = texts.fullmatch(_DECIMAL_COMMA).to_numpy(dtype=bool)   # (of the present cells)
        if not (is_number & texts.contains(",", regex=False).to_numpy(dtype=bool)).any() or \
                not (is_number | ~texts.contains(r"\d").to_numpy(dtype=bool)).all():
            continue
        if out is df:
            out = df.copy()
        number_cells = np.zeros(len(series), dtype=bool)   # (of every cell: the states' text left as it is)
        number_cells[np.flatnonzero(~pd.isna(series).to_numpy())[is_number]] = True
        pointed = series.mask(number_cells, series.str.replace(",", ".", regex=False))
        if col == time_name:   # numbers, as the same times written with points read (_read_csv, _exact_times)
            numbers = coerce_float64(pointed)
            if not np.isnan(numbers).any() and _changed_by_float(numbers, pointed) is False:
                pointed = pd.Series(numbers, index=series.index, name=col)
        out.isetitem(position, pointed)
    return out


def _exact_times(path: Path, df: pd.DataFrame, kwargs: dict[str, Any], time_name: str = TIMESTAMP
                 ) -> pd.DataFrame:
    """A ``timestamp`` column (or the one named ``time_name``) that pandas read as float64, kept as its text where
    float64 changed a value (epoch seconds to the tenth of a microsecond, 1700000000.0000001, read as 1700000000.0:
    neighbouring rows then "repeated" each other, and SCORES.csv wrote other times than DATA's). Only that column is
    read again (reading the table once with the column as text was slower: benchmarks/results/io_timestamps)."""
    try:
        raw = _csv_call(path, **{**kwargs, "usecols": [time_name], "dtype": str, "keep_default_na": False})
    except InputError:
        return df
    text = raw[time_name]
    if len(text) != len(df):
        return df
    # (the nearest floats of the text on any pandas: _csv_call reads them so before pandas 3.1 too)
    if _changed_by_float(df[time_name].to_numpy(), text):
        return df.assign(**{time_name: text.str.strip().to_numpy(dtype=object)})
    return df


def _changed_by_float(numbers: np.ndarray, text: pd.Series) -> Optional[bool]:
    """Whether float64 changed a value of ``text`` in ``numbers`` (the first row where it did decides; True), kept
    every one (False), or None: a text that Decimal does not read ('1_000') before any changed one."""
    from decimal import Decimal, InvalidOperation

    # A decimal of at most 15 significant digits reads back from float64 as written: only longer ones are compared
    # (and only texts of 16 characters or more can hold that many digits: counting them in every row's text took
    # as long as the read, 0.6 s a million rows)
    wide = np.flatnonzero(text.str.len().to_numpy(dtype=np.float64, na_value=0.0) > 15)
    # In blocks, growing, so that a column changed in its first rows is decided there: a text that is its float's
    # shortest repr (Python's, pandas' to_csv) holds that float exactly, and only the others are compared as
    # Decimals (as every long one was: 1.5 s a million epoch seconds of 17 digits, as pandas writes time.time())
    start, size = 0, 1024
    while start < len(wide):
        rows = wide[start:start + size]
        start, size = start + size, size * 8
        texts = text.iloc[rows].to_numpy(dtype=object)
        shown = np.fromiter(map(repr, numbers[rows].tolist()), dtype=object, count=len(rows))
        others = np.flatnonzero(shown != texts)
        digits = (text.iloc[rows[others]].str.replace(r"[eE].*$|[^0-9]", "", regex=True).str.lstrip("0").str.len()
                  .to_numpy())
        long = others[digits > 15]
        for value, written in zip(numbers[rows[long]], texts[long]):
            try:
                if np.isfinite(value) and Decimal(repr(float(value))) != Decimal(str(written).strip()):
                    return True
            except (InvalidOperation, ValueError):
                return None
    return False


_SAMPLE_CHARS = 1 << 16


def _sample(path: Path, encoding: str = _DEFAULT_ENCODING) -> Optional[str]:
    """The table's first ``_SAMPLE_CHARS`` characters (decompressed, in ``encoding``, without a UTF-8 byte-order
    mark by default), or None when they cannot be read (the read itself then reports why)."""
    from pandas.io.common import get_handle

    try:
        with get_handle(path, "r", compression="infer", encoding=encoding) as handle:
            return handle.handle.read(_SAMPLE_CHARS)
    except (OSError, EOFError, UnicodeDecodeError, ValueError, zlib.error):
        return None


def _other_separator_header(sample: Optional[str]) -> bool:
    """Whether the table's first line (of its ``_sample``) holds ';', tab or '|' and no ',' (a European
    spreadsheet's export)."""
    first = (sample or "").partition("\n")[0]
    return "," not in first and any(c in first for c in ";\t|")


def _blank_separated(df: pd.DataFrame, rows: int = 50) -> bool:
    """Whether a table read with ',' as one column is blank-separated: its name splits on blanks into several
    fields, and so does each of its first ``rows`` values, into as many. A one-sensor CSV whose name has a space
    ('sensor a', values '1.5') keeps its one column: its values do not split."""
    fields = len(str(df.columns[0]).split())
    if fields < 2:
        return False
    values = df.iloc[:rows, 0]
    return len(values) > 0 and all(isinstance(v, str) and len(v.split()) == fields for v in values)


# The separators a sensor table uses. pandas' own sniffing (sep=None) lets csv.Sniffer consider every character, and
# a header like "timestamp|s0|s1|..." was split on the letter 's'.
_SEPARATORS = ",;\t| "


def _sniffed(sample: Optional[str]) -> dict[str, Any]:
    """read_csv options for a table whose separator is guessed from its ``_sample`` (the python engine: pandas'
    sniffing and regex separators need it)."""
    return {"sep": _sniffed_separator(sample), "engine": "python"}


def _sniffed_separator(sample: Optional[str]) -> Optional[str]:
    """The separator of a text table among ``_SEPARATORS`` ("\\s+" for blanks), from the first whole lines of its
    ``_sample``; None (pandas' own sniffing) when the sample does not decide or could not be read (the read reports
    that)."""
    if sample is None:
        return None
    lines = sample.splitlines()[:50]
    if len(sample) == _SAMPLE_CHARS and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    try:
        separator = csv.Sniffer().sniff("\n".join(lines), delimiters=_SEPARATORS).delimiter
    except csv.Error:
        # The sniffer wants the same count of one character on every line: columns aligned with runs of blanks
        # ('   0  -1.19   0.25') fail it, and pandas' own guess then split on single spaces. Blanks it is when
        # no line holds another separator and every line splits into as many fields.
        counts = {len(line.split()) for line in lines if line.strip()}
        if len(counts) == 1 and counts.pop() > 1 and not any(c in line for line in lines for c in ",;\t|"):
            return r"\s+"
        return None
    return r"\s+" if separator == " " else separator


def _csv_call(path: Path, **kwargs: Any) -> pd.DataFrame:
    """``pandas.read_csv`` with every failure as an InputError naming the file."""
    try:
        with warnings.catch_warnings():
            # A large file whose column turns to text after the first chunk warns of "mixed types" (DtypeWarning):
            # the column arrives as text and its first non-number is reported below as the one error line.
            warnings.simplefilter("ignore", pd.errors.DtypeWarning)
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            options = {**float_read_options(kwargs.get("engine")), **kwargs}
            try:
                df = pd.read_csv(path, **options)
            except OverflowError:
                # pandas 3.0 cannot build a column of integers past float64's range (pandas 2 keeps their text,
                # 3.1 Python ints): read those columns as text, which the checks then refuse naming the column and
                # row, as on pandas 3.1
                df = _huge_ints_as_text(path, options)
            if kwargs.get("engine") == "python" and not pandas_rounds_floats():
                df = _python_engine_floats(path, options, df)
            return df
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty") from None
    except UnicodeDecodeError as exc:
        encoding = kwargs.get("encoding", _DEFAULT_ENCODING)
        if encoding == _DEFAULT_ENCODING:
            raise InputError(f"{path}: cannot read as CSV: not UTF-8 text ({_one_line(exc)}); pass --encoding cp1252 "
                             "(or the file's encoding), or save it as UTF-8") from None
        raise InputError(f"{path}: cannot read as CSV: not {encoding} text ({_one_line(exc)}); pass the file's "
                         "encoding, or save it as UTF-8") from None
    except (pd.errors.ParserError, ValueError, OSError, EOFError, zlib.error, csv.Error) as exc:
        # OSError includes a damaged .gz (BadGzipFile); EOFError a truncated one.
        text = _one_line(exc)
        if kwargs.get("sep", ",") == "," and re.search(r"Expected \d+ fields in line \d+, saw \d+", text):
            # (pandas' line alone left the likeliest cause to guess: one cell written as 1,5)
            text += ": a value with a decimal comma (1,5 for 1.5) or an unquoted comma in that line?"
        raise InputError(f"{path}: cannot read as CSV: {text}") from None
    except OverflowError:   # (the text re-read of _huge_ints_as_text did not help: such an integer in the index)
        raise InputError(f"{path}: cannot read as CSV: an integer beyond float64's range (~1.8e308)") from None


def _huge_ints_as_text(path: Path, options: dict[str, Any]) -> pd.DataFrame:
    """The table ``pandas.read_csv(path, **options)`` with the columns that hold an integer beyond float64's range
    read as text (pandas 3.0 raises OverflowError on such a column); the other columns as pandas reads them."""
    text = pd.read_csv(path, **{**options, "dtype": str})
    huge = [c for c in text.columns if text[c].map(_huge_int).any()]
    return pd.read_csv(path, **{**options, "dtype": {c: str for c in huge}})


def _python_engine_floats(path: Path, options: dict[str, Any], df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (read by pandas' python engine, which takes no float_precision and before pandas 3.1 reads some
    decimals a unit in the last place off) with its float64 columns read as the nearest float64 of their text:
    the same CSV then gives the same floats whichever engine its separator needs."""
    columns = [j for j in range(df.shape[1]) if df.dtypes.iloc[j] == np.float64]
    if not columns:
        return df
    raw = pd.read_csv(path, **{**options, "dtype": str, "keep_default_na": False, "na_filter": False})
    if raw.shape != df.shape:
        return df
    df = df.copy()
    for j in columns:
        df.isetitem(j, _nearest_floats(raw.iloc[:, j].to_numpy(dtype=object), df.iloc[:, j].to_numpy()))
    return df


def _check_header(path: Path, df: pd.DataFrame, kwargs: dict[str, Any]) -> None:
    """Refuse what pandas would silently work around: data rows with more fields than the header (the extra
    leading fields become an index, e.g. under a comment line), and repeated or empty header names (renamed
    'a.1', 'Unnamed: 0'). Reads the first two lines again, without a header."""
    try:
        raw = _csv_call(path, **{**kwargs, "header": None, "nrows": 2, "dtype": str, "keep_default_na": False})
    except InputError as err:   # line 2 longer than line 1: read with a header, pandas took it for an index
        comment = str(df.columns[0]).lstrip().startswith("#")
        raise InputError(f"{err}; the data rows have more fields than the header line"
                         + (" (line 1 looks like a comment: remove it)" if comment else "")) from None
    names = ["" if pd.isna(v) else str(v) for v in raw.iloc[0]] if len(raw) else []
    if len(names) != df.shape[1]:
        return  # the header is not one plain row (e.g. a multi-row header): keep pandas' reading
    names = [n.strip() for n in names]
    fractions = [n for n in names if _is_number(n) and not n.lstrip("+-").isdigit()]
    if len(fractions) and all(_is_number(n) for n in names):
        raise InputError(f"{path}: line 1 holds numbers such as {fractions[0]!r}, not column names: a file without "
                         f"a header line? add one ('{TIMESTAMP}' and the sensor names)")
    duplicated = sorted({n for n in names if n and names.count(n) > 1})
    if duplicated:
        raise InputError(f"{path}: duplicate column name(s): {', '.join(duplicated)}")
    if "" in names:
        j = names.index("")
        hint = ("a separator at the end of every line?" if not any(names[j:]) else
                f"a DataFrame index saved with it? write with index=False, or name it '{TIMESTAMP}'")
        raise InputError(f"{path}: column {j + 1} has no name in the header ({hint})")


# The largest integer float64 holds (finite): a Python int beyond it cannot be converted.
_FLOAT64_MAX_INT = int(np.finfo(np.float64).max)


def _huge_int(value) -> bool:
    """Whether ``value`` is an integer beyond float64's range: a Python int (pandas 3.1 reads such digits as ints)
    or such digits as text (pandas 2 keeps them as text, and pandas 3.0 cannot read them otherwise)."""
    if isinstance(value, str):
        text = value.strip(_ASCII_BLANKS)
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            return False
        digits = text.lstrip("+-").lstrip("0")   # (counted first: int() of over 4300 digits is refused)
        return len(digits) > 309 or (len(digits) == 309 and int(digits) > _FLOAT64_MAX_INT)
    return isinstance(value, int) and abs(value) > _FLOAT64_MAX_INT


def _shown_int(value, limit: int = 40) -> str:
    """A ``_huge_int`` for a message, its digits shown alike whether pandas gave an int or its text (no quotes)."""
    if not isinstance(value, str):
        return short_repr(value, limit)
    text = value.strip(_ASCII_BLANKS)
    text = ("-" if text.startswith("-") else "") + text.lstrip("+-").lstrip("0")   # (as repr shows the int)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def coerce_float64(values: pd.Series) -> np.ndarray:
    """``pd.to_numeric(values, errors="coerce")`` as float64 (NaN where missing or not a number), integers beyond
    float64's range as +-inf, as the same digits read as text become: on such ints to_numeric raises OverflowError
    instead of coercing."""
    try:
        numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    except OverflowError:
        huge = [isinstance(v, int) and _huge_int(v) for v in values]
        rest = pd.Series([None if h else v for h, v in zip(huge, values)], index=values.index, dtype=object)
        numbers = pd.to_numeric(rest, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        numbers[huge] = [np.inf if v > 0 else -np.inf for h, v in zip(huge, values) if h]
    if not pandas_rounds_floats() and not pd.api.types.is_numeric_dtype(values.dtype):
        numbers = _text_floats(values, numbers)
    return numbers


def _text_floats(values: pd.Series, numbers: np.ndarray) -> np.ndarray:
    """``numbers`` (to_numeric's reading of ``values``) with each plain decimal text among ``values`` read as Python's
    float() reads it: before pandas 3.1 to_numeric can be a unit in the last place off, and pandas 2 reads a
    decimal past float64's range ('1e400', 400 digits) as no number where pandas 3 reads +-inf."""
    objects = values.to_numpy(dtype=object)
    rows = np.flatnonzero(np.fromiter((isinstance(v, str) for v in objects), dtype=bool, count=len(objects)))
    if not len(rows):
        return numbers
    read = _plain_floats(objects[rows])
    if read is None:   # (without pyarrow: one by one)
        read = np.array([float(t) if re.fullmatch(_PLAIN_FLOAT, t.strip(_ASCII_BLANKS)) else np.nan
                         for t in objects[rows].tolist()])
    plain = ~np.isnan(read)
    out = numbers.copy()
    out[rows[plain]] = read[plain]
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _output_kind(path: str | os.PathLike) -> Optional[str]:
    """What ``write_table`` writes at ``path``: "parquet", "csv", "tsv" (tab-separated), or None for a name that
    ``read_frame`` would not read back as a table (``.npy``, ``.json``, ``.xlsx``, none)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _PARQUET:
        return "parquet"
    if suffix in _COMPRESSED:   # scores.csv.gz: pandas compresses as the last suffix says
        suffix = Path(path.stem).suffix.lower()
    if suffix in _CSV:
        return "tsv" if suffix == ".tsv" else "csv"
    return None


def check_writable_table(path: str | os.PathLike, inputs: Sequence[str | os.PathLike] = ()) -> None:
    """Before any work: the output ``path`` needs a table's name (.csv / .txt / .tsv, optionally compressed as
    ``.csv.gz``, or .parquet / .pq), pyarrow for Parquet, and must not be one of the command's ``inputs`` (writing
    the scores over the data they come from); InputError naming the path otherwise."""
    kind = _output_kind(path)
    if str(path) == "-":
        raise InputError("-: this output is written to a file, not to standard output (only detect's and watch's "
                         "--out take '-'); name it .csv (or .csv.gz, .tsv) or .parquet")
    if kind is None:
        suffix = Path(path).suffix or "(none)"
        raise InputError(f"{path}: unknown output type {suffix!r}; name the output .csv (or .csv.gz, .tsv) or "
                         ".parquet")
    if kind == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError(f"{path}: writing Parquet needs pyarrow (pip install 'mscred[parquet]'), or name "
                             "the output .csv") from None
    target = Path(path).resolve()
    for source in inputs:
        if Path(source).resolve() == target:
            raise InputError(f"{path}: is also an input of this command; writing it would replace that input: "
                             "give the output another name")


def write_table(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """``frame`` (no index) to ``path`` as ``read_frame`` reads it back: Parquet for ``.parquet``/``.pq``,
    tab-separated text for ``.tsv``, else CSV (``check_writable_table`` first)."""
    kind = _output_kind(path)
    if kind == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, sep="\t" if kind == "tsv" else ",")


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError(f"{path}: reading Parquet needs pyarrow (pip install 'mscred[parquet]')") from None
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid/OSError family for damaged files
        raise InputError(f"{path}: cannot read as Parquet: {_one_line(exc)}") from None
    if df.shape[1] == 0:
        raise InputError(f"{path}: the table has no columns")
    return df  # a stored non-default index (e.g. timestamps) stays the index: table_from_frame keeps it


def _read_npy(path: Path) -> pd.DataFrame:
    try:
        array = np.load(path, allow_pickle=False)  # never unpickle user files
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read as .npy: {_one_line(exc)}") from None
    if array.dtype.names:  # structured array: its fields are the columns
        shaped = [name for name in array.dtype.names if array.dtype[name].shape]
        if shaped:   # (pandas would stop with an internal ValueError)
            raise InputError(f"{path}: field '{shaped[0]}' of the structured array holds "
                             f"{array.dtype[shaped[0]].shape} values a row; each field must be one value a row")
        return pd.DataFrame({name: array[name] for name in array.dtype.names})
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise InputError(f"{path}: expected a 2-D array (T, n), got shape {array.shape}")
    if array.shape[1] == 0:
        raise InputError(f"{path}: the array has no columns")
    frame = pd.DataFrame(array, columns=[f"sensor_{j}" for j in range(array.shape[1])])
    frame.attrs[POSITIONAL] = True   # names of our making: load_table marks the Table positional
    return frame


def parse_times(values) -> pd.DatetimeIndex:
    """``values`` as UTC date-times, NaT where one does not read as one in the first one's format (a table's
    timestamps here; evaluate's SCORES timestamps and anomalies' start/end the same way)."""
    with warnings.catch_warnings():   # "could not infer format": expected for ids that are not dates
        warnings.simplefilter("ignore")
        try:
            return pd.DatetimeIndex(pd.to_datetime(pd.Index(values), errors="coerce", utc=True))
        except (ValueError, TypeError, OverflowError):
            return pd.DatetimeIndex([pd.NaT] * len(values), tz="UTC")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class Normalizer:
    """Per-sensor min-max scaling fitted on training data: ``(x - min) / (max - min)``.

    A constant sensor (max == min) gets scale 1, so it maps to 0 on the training data and never to NaN.

    Attributes
    ----------
    min_ : np.ndarray, float64, shape (n,)
    scale_ : np.ndarray, float64, shape (n,)
        ``max - min``, or 1 where that is 0.
    CLIP : float
        Scaled values are kept within [-CLIP, 1 + CLIP] (see :meth:`transform`).
    """

    # 1e3 training ranges: signature products stay below ~1e6, far inside float32, yet nothing scaled from real
    # sensor data within a thousand times its training range is changed.
    CLIP = 1e3

    def __init__(self, min_: Optional[np.ndarray] = None, scale_: Optional[np.ndarray] = None):
        self.min_ = None if min_ is None else np.asarray(min_, dtype=np.float64)
        self.scale_ = None if scale_ is None else np.asarray(scale_, dtype=np.float64)

    def fit(self, values) -> "Normalizer":
        """Fit on training values (T, n); returns self."""
        values = self._as_2d(values)
        if values.shape[0] == 0:
            raise InputError("cannot fit the normaliser on an empty table")
        self.min_ = values.min(axis=0)
        span = values.max(axis=0) - self.min_
        self.scale_ = np.where(span > 0, span, 1.0)
        return self

    def transform(self, values) -> np.ndarray:
        """Scale values (T, n) with the fitted statistics; returns float64 (T, n).

        Values beyond ``CLIP`` training ranges (a sensor's 1e30 glitch) are clipped to it: their products in the
        signature matrices would overflow float32 into inf/NaN scores, which flag nothing and break evaluation.
        Clipped, they are still ``CLIP`` ranges away, as anomalous as anything the model can score.
        """
        if self.min_ is None:
            raise RuntimeError("Normalizer.transform called before fit")
        values = self._as_2d(values)
        if values.shape[1] != self.min_.shape[0]:
            raise InputError(f"expected {self.min_.shape[0]} sensors, got {values.shape[1]}")
        with np.errstate(over="ignore"):
            scaled = (values - self.min_) / self.scale_
        return np.clip(scaled, -self.CLIP, 1.0 + self.CLIP)

    def fit_transform(self, values) -> np.ndarray:
        return self.fit(values).transform(values)

    def to_dict(self) -> dict[str, list[float]]:
        """JSON-able statistics: ``{"min": [...], "scale": [...]}``."""
        if self.min_ is None:
            raise RuntimeError("Normalizer.to_dict called before fit")
        return {"min": [float(v) for v in self.min_], "scale": [float(v) for v in self.scale_]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Normalizer":
        """Rebuild from :meth:`to_dict`; a damaged dict raises InputError."""
        try:
            lo = np.asarray(data["min"], dtype=np.float64)
            scale = np.asarray(data["scale"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"normalisation statistics are damaged: {_one_line(exc)}") from None
        if lo.ndim != 1 or lo.shape != scale.shape:
            raise InputError(f"normalisation statistics are damaged: min {lo.shape} vs scale {scale.shape}")
        if not (np.isfinite(lo).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise InputError("normalisation statistics are damaged: non-finite min or non-positive scale")
        return cls(lo, scale)

    @staticmethod
    def _as_2d(values) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"values must have shape (T, n), got {values.shape}")
        return values
