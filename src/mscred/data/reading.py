"""How a table's cells are read beyond its file format: ``Reading``, what ``train --time-column`` and ``--na-value``
set and a model keeps (``TrainConfig.time_column``, ``na_values``), so that every command reading data for that
model reads it the same way.

- The time column under another name than ``timestamp`` (a historian's ``Time``, ``Date Time``) is renamed
  ``timestamp`` as the table is read, the name every reader downstream looks for; messages still name it as the
  file does (``time_label``).
- Text that stands for a missing sensor value in a historian's export (OSIsoft PI's digital states ``Bad``, ``I/O
  Timeout``, ``No Data``; a SCADA's ``-``) becomes NaN as the table is read, besides the empty cells and NaN that
  are missing anyway: the ``missing`` policy then decides (an error naming the cell, or interpolation). Without it
  such a cell is refused as not a number, as SPEC asks of non-numeric values.
- A long table, one value a row (time, sensor name, value: a historian's or Prometheus' export), is made wide (a
  row per time, a column per sensor, in the order they first appear) as it is read (``widened``); a time a sensor
  has no value at is a missing value. The commands that follow a file as it grows (``watch``) hold a time's
  lines until a later time shows them complete (``mscred.data.long_feed``).
- Columns that are not sensors (a status text, a unit, an operator's comment, a batch ID: ``--drop-columns``) are
  left out as the table is read, wherever they are present; a long table may then carry them beside its three.
- Local times written without a UTC offset are read in a time zone (``--time-zone Europe/Berlin``): the hour the
  clocks go back, which comes twice, told apart by order (``mscred.data.time_zone``).
- Of a table's sensors, only some may be read (``--sensors``: a few tags of a historian's export of hundreds): the
  others' columns, or a long table's lines of them, are left out; a sensor asked for that the table lacks is refused
  by name (a followed long feed's piece may lack one: a missing value there, as for any sensor).
"""
from __future__ import annotations

import shlex
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from mscred.atomic import few_names
from mscred.data.io import HOLD, LABEL, POSITIONAL, ROW_TIME, TIME_NAME, TIMESTAMP, short_repr
from mscred.data.resample import RESAMPLE
from mscred.data.states import coded_states
from mscred.data.time_zone import ZoneClock, checked_zone, localized
from mscred.errors import InputError

@dataclass(frozen=True)
class Reading:
    """``time_column``: the column holding each row's time where it is not named ``timestamp`` (None: that one);
    ``na_values``: text read as a missing value in the sensor columns, compared with the cell's blanks stripped;
    ``long_columns``: (sensor name column, value column) of a long table, None for a wide one; ``resample``: the
    period of the time grid the rows are put on (``mscred.data.resample``), None to take them as they are;
    ``sensors``: the only sensors read (None: every one); ``drop_columns``: columns left out wherever present;
    ``time_zone``: the IANA zone of wall times written without an offset (None: taken as they are); ``hold``: the
    sensors whose missing values hold their last value whatever the missing policy says of the others (states and
    step tags beside float tags; ``table_from_frame`` reads them from the frame's ``attrs``); ``states``: columns of
    text states read as their positions, ``NAME=STATE,STATE,...`` each (``mscred.data.states``). ``clock``: a
    followed feed's (``followed``), carrying the last instant read across its pieces' seams."""

    time_column: Optional[str] = None
    na_values: tuple[str, ...] = ()
    long_columns: Optional[tuple[str, str]] = None
    resample: Optional[str] = None
    sensors: Optional[tuple[str, ...]] = None
    drop_columns: tuple[str, ...] = ()
    time_zone: Optional[str] = None
    hold: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    clock: Optional[ZoneClock] = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.time_zone is not None:
            checked_zone(self.time_zone)
        # The time and the label are read as such, never as sensors: asked to leave one out (a command's
        # --drop-columns timestamp), say so rather than read the rows without their times
        for name in self.drop_columns:
            if name in (self.time_column or TIMESTAMP, TIMESTAMP, LABEL):
                raise InputError(f"--drop-columns {name}: the {'label' if name == LABEL else 'time'} column is read "
                                 "as such, not as a sensor; nothing to leave out")

    @classmethod
    def of_model(cls, train, time_column: Optional[str] = None, na_values: Sequence[str] = (),
                 long_columns: Optional[tuple[str, str]] = None, drop_columns: Sequence[str] = (),
                 time_zone: Optional[str] = None) -> "Reading":
        """A model's reading (``train``: its ``TrainConfig``) with a command's options over it: the time column, the
        long table's columns and the time zone given instead of the model's, the missing-value text and the columns
        to leave out given besides the model's. The resampling period, the sensors read and those held are the
        model's alone: its windows are spans of that grid, and it scores its own sensors, read as it read them (its
        states' columns too)."""
        return cls(time_column or train.time_column, tuple(dict.fromkeys((*train.na_values, *na_values))),
                   long_columns or train.long_columns, train.resample, train.only_sensors,
                   tuple(dict.fromkeys((*train.drop_columns, *drop_columns))), time_zone or train.time_zone,
                   train.hold_sensors, train.states)

    def followed(self) -> "Reading":
        """This reading for the pieces of one followed feed (``watch``'s, a ``Monitor``'s chunks), in order: a
        clock of its own, so that a piece's rows in the hour the clocks go back are told apart against the pieces
        before (``time_zone``); the same reading where there is no time zone."""
        return self if self.time_zone is None else replace(self, clock=ZoneClock())

    def frame(self, df: pd.DataFrame, source: str, strict: bool = True) -> pd.DataFrame:
        """``df`` read so: its time column renamed (``named_time_column``), its wall times placed in ``time_zone``
        (``time_zone.localized``), a long table made wide (``widened``)
        and the missing-value text made NaN (``missing_text``), the states' columns read as numbers (``coded_states``),
        marked to be put on the ``resample`` grid. Not
        ``strict`` (a Python caller's frame, which may be indexed by its times, or wide already): a frame without
        the time column, or without the long table's columns, is left as it is in that respect (rows without times
        are taken as on the grid already)."""
        names = {str(c).strip() for c in df.columns}
        if strict or self.time_column in names:
            df = named_time_column(df, self.time_column, source)
        df = dropped_columns(df, self.drop_columns)
        if self.time_zone is not None:
            df = localized(df, self.time_zone, source, self.clock,
                           None if self.long_columns is None else self.long_columns[0])
        if self.long_columns is not None and (strict or set(self.long_columns) <= names):
            df = widened(only_lines_of(df, self.long_columns[0], self.sensors, source), *self.long_columns, source)
        else:
            df = only_sensors(df, self.sensors, source)
        df = missing_text(df, self.na_values)
        if self.states:   # (after the missing-value text: a state column's "Bad" is a missing value, not a state)
            df = coded_states(df, self.states, source)
        timed = TIMESTAMP in df.columns or not isinstance(df.index, pd.RangeIndex)
        if self.resample is not None and (strict or timed):   # (done as the frame becomes a Table: data.resample)
            df = df.copy(deep=False) if df.attrs.get(RESAMPLE) != self.resample else df
            df.attrs[RESAMPLE] = self.resample
        if self.hold and tuple(df.attrs.get(HOLD, ())) != self.hold:   # (as the frame becomes a Table: data.io)
            df = df.copy(deep=False)
            df.attrs[HOLD] = self.hold
        return df

    def options(self) -> str:
        """The command-line options that read a table so, as a shell takes them ('' for a plain reading):
        ``mscred info`` shows a model's."""
        words = []
        if self.time_column not in (None, TIMESTAMP):
            words += ["--time-column", self.time_column]
        for text in self.na_values:
            words += ["--na-value", text]
        if self.long_columns is not None:
            words += ["--long", ",".join(self.long_columns)]
        if self.resample is not None:
            words += ["--resample", self.resample]
        if self.sensors is not None:
            words += ["--sensors", ",".join(self.sensors)]
        if self.drop_columns:
            words += ["--drop-columns", ",".join(self.drop_columns)]
        if self.time_zone is not None:
            words += ["--time-zone", self.time_zone]
        if self.hold:
            words += ["--hold", ",".join(self.hold)]
        for spec in self.states:
            words += ["--states", spec]
        return shlex.join(words)


PLAIN = Reading()   # a table as its format gives it


def named_time_column(df: pd.DataFrame, time_column: Optional[str], source: str) -> pd.DataFrame:
    """``df`` with its column ``time_column`` renamed ``timestamp``, the name every reader downstream takes for the
    rows' time (the name given kept in ``attrs`` for messages: ``time_label``); ``df`` itself where
    ``time_column`` is None or ``timestamp``. InputError where ``df`` has no such column, has it twice, or has a
    ``timestamp`` column as well (which one is the time would be a guess). Names compare stripped, as read."""
    if time_column is None or time_column == TIMESTAMP:
        return df
    names = [str(c).strip() for c in df.columns]
    if df.attrs.get(POSITIONAL):
        raise InputError(f"{source}: an array without column names has no column '{time_column}' (the time column "
                         "asked for); save a table with a header, or a structured array")
    if time_column not in names:
        raise InputError(f"{source}: no column '{time_column}' (the time column asked for); its columns: "
                         f"{few_names([repr(n) for n in names], 8)}")
    if names.count(time_column) > 1:
        raise InputError(f"{source}: duplicate column name(s): {time_column}")
    if TIMESTAMP in names:
        raise InputError(f"{source}: columns '{time_column}' (the time column asked for) and '{TIMESTAMP}' both; "
                         f"drop or rename '{TIMESTAMP}', or ask for it as the time column")
    out = df.set_axis([TIMESTAMP if n == time_column else c for n, c in zip(names, df.columns)], axis=1)
    out.attrs[TIME_NAME] = time_column
    return out


def long_table_columns(df: pd.DataFrame, sensor_column: str, value_column: str, source: str) -> list[str]:
    """``df``'s column names (stripped, as read) where they are a long table's -- the time, ``sensor_column`` and
    ``value_column``, no other -- else InputError naming what is missing or extra (``widened``'s first check, and
    ``watch``'s on each piece of a long feed before it looks for the pieces' times)."""
    names = [str(c).strip() for c in df.columns]
    for name, what in ((sensor_column, "sensor name"), (value_column, "value")):
        if name not in names:
            raise InputError(f"{source}: no column '{name}' (the long table's {what} column asked for); its "
                             f"columns: {few_names([repr(n) for n in names], 8)}")
    if sensor_column == value_column:
        raise InputError(f"{source}: the long table's sensor name and value columns are both '{value_column}'")
    if TIMESTAMP not in names:
        raise InputError(f"{source}: a long table needs its time column to make rows of: name it '{TIMESTAMP}', or "
                         "give --time-column NAME")
    others = [n for n in names if n not in (TIMESTAMP, sensor_column, value_column)]
    if others:
        raise InputError(f"{source}: a long table holds the time, the sensor name and the value: other columns "
                         f"({', '.join(repr(n) for n in others[:5])}) would be lost; drop them")
    return names


def widened(df: pd.DataFrame, sensor_column: str, value_column: str, source: str,
            row_name: Optional[Callable[[int], str]] = None) -> pd.DataFrame:
    """The long table ``df`` (a ``timestamp`` column, ``sensor_column`` naming each row's sensor, ``value_column`` its
    value) as a wide one: a ``timestamp`` column of its times (in order: ``_time_order``), and a column per sensor in
    the order the sensors first appear, NaN where a sensor has no value at a time. InputError naming the row for a row
    without a sensor name and for a time given twice for one sensor; naming the columns for a missing one, and for any
    other column (a unit, a quality flag: drop them; a label belongs in a wide table or anomalies.csv).
    ``row_name(position)``: where the row at ``position`` is in its file (``line 12``), said instead of ``row N``
    where the rows are not the file's from its first (``watch``'s pieces of a feed)."""
    names = long_table_columns(df, sensor_column, value_column, source)
    df = df.set_axis(names, axis=1)
    sensors = df[sensor_column]
    unnamed = np.flatnonzero(sensors.isna().to_numpy() | (sensors.astype(str).str.strip() == "").to_numpy())

    def row(position: int) -> str:
        return f"row {position + 1}" if row_name is None else row_name(position)

    if len(unnamed):
        raise InputError(f"{source}: column '{sensor_column}' {row(unnamed[0])}: no sensor name")
    sensors = sensors.astype(str).str.strip()
    times = df[TIMESTAMP]
    # Each line's time and sensor as codes (in first-appearance order), so that the repeats, the order and the wide
    # matrix are found on integers: a pivot of pandas 3's text columns spent most of its time converting them to
    # Python objects and back (2 million lines: 1.48 s, 0.19 s this way; benchmarks/results/long_widen/)
    time_codes, distinct_times = pd.factorize(times, use_na_sentinel=False)
    sensor_codes, columns = pd.factorize(sensors)
    cells = time_codes.astype(np.int64) * len(columns) + sensor_codes
    repeated = np.flatnonzero(pd.Series(cells).duplicated().to_numpy())
    if len(repeated):
        r = int(repeated[0])
        raise InputError(f"{source}: {row(r)}: sensor {short_repr(sensors.iloc[r])} at {short_repr(times.iloc[r])} "
                         "a second time; a long table gives each sensor one value a time")
    in_order = _time_order(distinct_times)
    row_of_time = np.empty(len(in_order), dtype=np.int64)
    row_of_time[in_order] = np.arange(len(in_order))
    values = df[value_column].to_numpy()
    complete = len(cells) == len(distinct_times) * len(columns)
    dtype = values.dtype if values.dtype.kind == "f" or (values.dtype.kind in "iu" and complete) else \
        np.float64 if values.dtype.kind in "iu" else object   # (as a pivot keeps or widens them)
    shape = (len(distinct_times), len(columns))
    wide = np.empty(shape, dtype=dtype) if complete else np.full(shape, np.nan, dtype=dtype)   # (complete: each set)
    wide[row_of_time[time_codes], sensor_codes] = values
    order = distinct_times.take(in_order)
    out = pd.DataFrame(wide, columns=list(columns), index=pd.Index(order, name=ROW_TIME))   # (messages name a row by
    out.insert(0, TIMESTAMP, np.asarray(order) if isinstance(order, np.ndarray) else order)  # its time: io._row)
    out.attrs.update(df.attrs)
    return out


def _time_order(times) -> np.ndarray:
    """Where each of a long table's distinct ``times`` goes, in order: numbers and dates sorted, text sorted where all
    of it is ISO 8601 (2026-01-05 10:00, unambiguous); other text (01/02/2026: day or month first?) as it first
    appears -- the order of a table whose sensors share their times -- and the wide table's time-order check
    refuses a wrong one."""
    index = pd.Index(times)
    if pd.api.types.is_numeric_dtype(index.dtype) or pd.api.types.is_datetime64_any_dtype(index.dtype):
        return np.argsort(np.asarray(index), kind="stable")
    with warnings.catch_warnings():   # (pandas' parse warnings: the text may be no dates at all)
        warnings.simplefilter("ignore")
        try:
            parsed = pd.DatetimeIndex(pd.to_datetime(index, format="ISO8601", utc=True, errors="coerce"))
        except (ValueError, TypeError, OverflowError):
            return np.arange(len(index))
    if len(index) and not parsed.isna().any():
        return np.argsort(parsed.asi8, kind="stable")
    return np.arange(len(index))


def dropped_columns(df: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """``df`` without its columns named in ``names`` (compared stripped, as read); ``df`` itself where it has none
    of them -- a column to leave out may come and go between a feed's files."""
    if not names:
        return df
    wanted = set(names)
    keep = [str(c).strip() not in wanted for c in df.columns]
    return df if all(keep) else df.loc[:, keep]


def only_lines_of(df: pd.DataFrame, sensor_column: str, sensors: Optional[Sequence[str]],
                  source: Optional[str] = None) -> pd.DataFrame:
    """A long table's lines of ``sensors`` alone (its sensor names compared stripped, as ``widened`` reads them);
    ``df`` itself for None, or where it has no such column (``widened`` refuses it by name). With ``source``, a
    sensor asked for without a line is an InputError naming it (a whole table's; not a followed feed's piece)."""
    if sensors is None:
        return df
    names = [str(c).strip() for c in df.columns]
    if sensor_column not in names:
        return df
    tags = df.iloc[:, names.index(sensor_column)].astype(str).str.strip()
    keep = tags.isin(set(sensors)).to_numpy(dtype=bool)
    if source is not None:
        _refuse_absent(sensors, set(tags[keep].unique()), lambda: list(pd.unique(tags)),
                       f"{source}: no line of sensor", f" in column '{sensor_column}'")
    return df if keep.all() else df[keep]


def only_sensors(df: pd.DataFrame, sensors: Optional[Sequence[str]], source: str) -> pd.DataFrame:
    """A wide ``df``'s time, label and ``sensors`` columns alone, in the table's order (``df`` for None);
    InputError naming the first sensor asked for that it lacks."""
    if sensors is None:
        return df
    names = [str(c).strip() for c in df.columns]
    _refuse_absent(sensors, set(names), lambda: [n for n in names if n not in (TIMESTAMP, LABEL)],
                   f"{source}: no column", "")
    wanted = {*sensors, TIMESTAMP, LABEL}
    keep = [name in wanted for name in names]
    return df if all(keep) else df.loc[:, keep]


def _refuse_absent(sensors: Sequence[str], present: set, all_sensors: Callable[[], list], lacks: str,
                   where: str) -> None:
    """InputError ``lacks`` 'name'``where`` for the first of ``sensors`` not ``present``, the others absent and
    the table's sensors (``all_sensors()``) after it; nothing where every one is present."""
    absent = [name for name in sensors if name not in present]
    if absent:
        others = f", nor {few_names([repr(n) for n in absent[1:]], 4)}" if len(absent) > 1 else ""
        raise InputError(f"{lacks} '{absent[0]}'{where} (a sensor asked for by --sensors){others}; its sensors: "
                         f"{few_names([repr(n) for n in all_sensors()], 8)}")


def missing_text(df: pd.DataFrame, na_values: Sequence[str]) -> pd.DataFrame:
    """``df`` with each text cell of a sensor column (not ``timestamp``, not ``label``) that reads as one of
    ``na_values`` (blanks stripped) made NaN; ``df`` itself where none does. Numeric columns hold no text."""
    if not na_values:
        return df
    wanted = set(na_values)
    out = df
    for position, name in enumerate(df.columns):
        series = df.iloc[:, position]
        if str(name).strip() in (TIMESTAMP, LABEL) or pd.api.types.is_numeric_dtype(series.dtype):
            continue
        try:   # (vectorised: a CSV's text column, pandas 3's str dtype, in ~1/20 of a per-cell map's time)
            hit = series.str.strip().isin(wanted).to_numpy(dtype=bool)
        except AttributeError:   # an object column without text (a Parquet column of numbers as objects)
            continue
        if hit.any():
            if out is df:
                out = df.copy()
            out.isetitem(position, series.mask(hit, np.nan))
    return out


def settings_reading(overrides: dict) -> Reading:
    """The reading a training run's settings ask for: ``MSCRED(**overrides)``'s, checked (a bad setting is an
    InputError before any table is read)."""
    from mscred.detector import MSCRED   # (the settings' resolution lives with the estimator)

    return Reading.of_model(MSCRED(**overrides).resolved_config().train)
