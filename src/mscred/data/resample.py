"""A table put on a regular time grid (``train --resample PERIOD``, the ``train.resample`` setting kept in the model):
each row the mean of the rows whose times fall in one period, a period without a value of a sensor a missing value
there, for the ``missing`` policy to decide.

MSCRED's windows count rows (10, 30, 60 of them at the paper's settings), so they mean a time span only where the
rows are evenly spaced. A historian's export is often not: OSIsoft PI records a tag when it changes (exception and
compression), a long table made wide has a row at every time any tag wrote, a logger stops and starts again. On the
grid a window is a fixed span of time again, and an outage becomes missing periods, which ``--missing`` refuses
(naming the first) or fills linearly -- linear in time now, as the grid is even -- instead of a window silently
joining both sides.

- PERIOD is a duration (``10s``, ``1min``, ``15 min``, ``1h``, ``1D``; pandas' ``Timedelta`` text) for times that
  are dates or durations, or a plain number (``60``) for times that are numbers, in their units.
- The grid is aligned to the epoch (dates: 1970-01-01 UTC; numbers and durations: 0), not to the first row, so that
  every file of a feed, a later file and a growing one fall on the same grid; a row at 10:00:30 with ``1min`` is in
  the period labelled 10:00:00 (its start; the period holds its start, not its end). Times placed in a zone
  (``--time-zone``) with a period of whole days (``1D``, ``7D``) are put on the zone's days instead, counted from
  1970-01-01's local midnight: each day from local midnight, 23 or 25 hours where the clocks change (``_local_days``).
- A period's value is the mean of the values its rows hold (missing ones skipped), or with ``PERIOD,HOW`` their
  last, first, largest or smallest (``1min,last``: a state's or a counter's value at the period's end); a ``label``
  is 1 where any row of the period is 1. Rows of one time (a logger that wrote twice) are taken as any rows of a
  period: the order check lets a time repeat the row before here, and still refuses one that goes back.
- Resampling a table on its grid already gives it back (a period's one row is its own mean), so a frame read twice
  reads the same.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np
import pandas as pd

from mscred.errors import InputError

if TYPE_CHECKING:   # (io and reading import this module)
    from mscred.data.io import Table
    from mscred.data.reading import Reading

# The attrs key of a frame to be resampled as it becomes a Table (``Reading.frame`` sets it, ``table_from_frame``
# reads it): the period's text
RESAMPLE = "mscred_resample"
# A grid larger than this many cells (rows x sensors, float64: 1.6 GB) is refused: a period far shorter than the
# table's spacing would make mostly empty rows, filled or refused one by one
MAX_GRID_CELLS = 200_000_000

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


# How a period's rows make its value (``--resample PERIOD,HOW``): the mean of its present values (the default), the
# last or first of them (a state, a counter's reading at the period's end), their largest or smallest
AGGREGATIONS = ("mean", "last", "first", "max", "min")


@dataclass(frozen=True)
class Period:
    """A resampling period as given (``text``, with its aggregation when one was named), as nanoseconds (``ns``: a
    duration) or as a number in the times' own units (``number``): one of the two is set; ``how``: one of
    ``AGGREGATIONS``."""

    text: str
    ns: Optional[int] = None
    number: Optional[float] = None
    how: str = "mean"

    @property
    def is_duration(self) -> bool:
        return self.ns is not None


def parse_period(text) -> Period:
    """``text`` (``--resample``'s, or the ``train.resample`` setting: ``PERIOD`` or ``PERIOD,HOW``, HOW one of
    ``AGGREGATIONS``) as a Period; InputError for anything else than a positive duration or a positive finite
    number, and an aggregation of another name."""
    full = str(text).strip()
    shown, comma, how = (part.strip() for part in full.partition(","))
    if comma and how not in AGGREGATIONS:
        raise InputError(f"--resample {full}: {how!r} is no way to make a period's value; give "
                         f"{', '.join(AGGREGATIONS)} after the comma (e.g. 1min,last), or none for the mean")
    how = how or "mean"
    if not shown:
        raise InputError("--resample: an empty period; give a duration such as 10s or 1min, or a number")
    if _NUMBER.match(shown):
        number = float(shown)
        if not (math.isfinite(number) and number > 0):
            raise InputError(f"--resample {shown}: the period must be more than 0")
        return Period(full, number=number, how=how)
    try:
        duration = pd.Timedelta(shown)
    except (ValueError, TypeError, OverflowError) as error:
        raise InputError(f"--resample {shown}: not a duration ({str(error).rstrip('.')}); give one such as 10s, 1min, "
                         "15min, 1h or 1D, or a number for times that are numbers") from None
    if pd.isna(duration) or duration.value <= 0:
        raise InputError(f"--resample {shown}: the period must be more than 0")
    return Period(full, ns=int(duration.value), how=how)


def resampled(table: "Table", period: Period, missing: str, times) -> "Table":
    """``table`` (a ``mscred.data.io.Table`` read with its missing values kept: NaN) on ``period``'s grid, its
    missing values then handled by ``missing`` as ``load_table`` handles them; ``times``: the order check's times of
    its rows (``_time_order``'s: keys, nanoseconds a key, whether they are dates or durations, the note), None for
    times that are neither numbers nor dates. The grid runs from the period of the first row to that of the last."""
    return resampled_parts([table], period, missing, times)[0]


def resampled_parts(parts: Sequence["Table"], period: Period, missing: str, times=None) -> list["Table"]:
    """``parts`` (Tables read with their missing values kept, one after the other in time: a feed's files, a file
    and the rows before it) put on one grid, as one table would be, and cut into as many tables again: a period
    goes to the part holding its last row (the later part, for one that spans a seam), an empty period to the part
    of the next period with rows. Missing values are interpolated over the whole grid, so across the seams too.
    ``times``: the order check's times of the parts' rows joined (computed here where None)."""
    from mscred.data.context import one_series
    from mscred.data.io import FILLING, Table, check_time_order, fill_missing

    table = one_series(parts, "the files of a feed")
    source = table.source
    timed = not isinstance(table.index, pd.RangeIndex)
    if times is None and timed:
        times = check_time_order(table.index, source, repeats=True)
    buckets = _checked_buckets(times, timed, period, source, getattr(table.index, "tz", None))
    first, last = int(buckets[0]), int(buckets[-1])
    rows = last - first + 1
    values = table.values
    if rows * max(1, values.shape[1]) > MAX_GRID_CELLS:
        from mscred.data.io import short_repr

        raise InputError(f"{source}: --resample {period.text}: {len(values):,} rows would make {rows:,} rows of "
                         f"{period.text} from {short_repr(table.index[0])} to {short_repr(table.index[-1])}; give a "
                         "longer period")
    starts = np.concatenate([[0], np.flatnonzero(np.diff(buckets)) + 1])
    at = buckets[starts] - first
    grid = np.full((rows, values.shape[1]), np.nan)
    grid[at] = _aggregated(values, starts, period.how)
    labels = None
    if table.labels is not None:
        labels = np.zeros(rows, dtype=table.labels.dtype)
        labels[at] = np.maximum.reduceat(table.labels, starts)
    index = _grid_index(first, rows, period, table.index)
    gaps = np.isnan(grid)
    held = np.array([name in table.held for name in table.sensors], dtype=bool)   # (held under any policy)
    if (gaps & ~held).any() and missing == "error":
        raise InputError(_missing_message(parts, gaps & ~held, buckets - first, starts, index, period))
    if gaps.any() and (missing in FILLING or missing == "error"):
        fill_missing(grid, gaps, table.sensors, source, missing, table.held)   # (in place; counted per part below)
    else:
        gaps = None
    # Each grid row's part: that of the last row of its period, or of the next period with rows
    part_of_row = np.repeat(np.arange(len(parts)), [len(p.values) for p in parts])
    ends = np.concatenate([starts[1:], [len(buckets)]]) - 1
    owner = part_of_row[ends][np.searchsorted(at, np.arange(rows), side="left")]
    cuts = np.searchsorted(owner, np.arange(len(parts) + 1), side="left")
    out = []
    for k, part in enumerate(parts):
        lo, hi = cuts[k], cuts[k + 1]
        part_gaps = None if gaps is None else gaps[lo:hi]
        out.append(Table(values=grid[lo:hi], sensors=list(table.sensors), index=index[lo:hi],
                         labels=None if labels is None else labels[lo:hi], source=part.source,
                         filled={} if part_gaps is None else _counts(part_gaps, table.sensors),
                         gaps=part_gaps if part_gaps is not None and part_gaps.any() else None,
                         positional=part.positional, time_note=times[3] if k == 0 and len(times) > 3 else None,
                         resampled=(len(part.values), period.text),
                         filled_by=missing if missing in FILLING and part_gaps is not None and part_gaps.any()
                         else None, held=table.held))
    return out


def _aggregated(values: np.ndarray, starts: np.ndarray, how: str) -> np.ndarray:
    """(periods, n): each period's value of each sensor from its rows (``values[starts[k]:starts[k + 1]]``, missing
    values NaN): ``how`` of its present values, NaN where it has none."""
    present = ~np.isnan(values)
    counts = np.add.reduceat(present.astype(np.int64), starts, axis=0)
    if how == "mean":
        sums = np.add.reduceat(np.where(present, values, 0.0), starts, axis=0)
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    if how in ("max", "min"):
        fill = -np.inf if how == "max" else np.inf
        found = (np.maximum if how == "max" else np.minimum).reduceat(np.where(present, values, fill), starts, axis=0)
        return np.where(counts > 0, found, np.nan)
    # last / first: the row of each period's last (first) present value of each sensor
    rows = np.arange(len(values))[:, None]
    if how == "last":
        row = np.maximum.reduceat(np.where(present, rows, -1), starts, axis=0)
    else:
        row = np.minimum.reduceat(np.where(present, rows, len(values)), starts, axis=0)
    return np.where(counts > 0, np.take_along_axis(values, np.clip(row, 0, len(values) - 1), axis=0), np.nan)


def load_on_grid(paths: Sequence, reading: "Reading", missing: str, **options) -> list["Table"]:
    """The tables at ``paths`` (one feed's, in time order) read with ``reading`` (whose ``resample`` is set) and put
    on its grid as one table (``resampled_parts``), cut into a table per path again; ``options`` go to
    ``load_table`` (``encoding``, ``ignore_label``). A path whose rows all fell into a period the next one shares
    gives a table without rows."""
    from mscred.data.io import KEEP, load_table

    raw = dataclasses.replace(reading, resample=None)
    parts = [load_table(path, missing=KEEP, reading=raw, **options) for path in paths]
    return resampled_parts(parts, parse_period(reading.resample), missing)


def _counts(gaps: np.ndarray, sensors: Sequence[str]) -> dict:
    return {name: int(n) for name, n in zip(sensors, gaps.sum(axis=0)) if n}




# A day in nanoseconds: a period of whole days is put on the zone's days (``_local_days``)
DAY_NS = 86_400 * 10 ** 9


def _local_days(period: Period, zone) -> bool:
    """Whether a grid of ``period`` over times in ``zone`` (a date-time index's tz, None for naive or UTC-offset
    text) runs on the zone's calendar days: a period of whole days (``1D``, ``7D``) in a zone other than UTC, whose
    days begin at local midnight (23 or 25 hours long where the clocks change) -- a shorter period keeps the epoch's
    even spacing, which the windows need, and in a whole-hour zone begins on the hour either way."""
    return zone is not None and period.is_duration and period.ns % DAY_NS == 0 and str(zone) not in ("UTC", "utc")


def _wall_ns(utc_ns: np.ndarray, zone) -> np.ndarray:
    """The wall-clock nanoseconds (as if UTC) of UTC instants ``utc_ns`` in ``zone``."""
    instants = pd.DatetimeIndex(np.asarray(utc_ns, dtype=np.int64).view("datetime64[ns]")).tz_localize("UTC")
    return instants.tz_convert(zone).tz_localize(None).as_unit("ns").asi8


def _checked_buckets(times, timed: bool, period: Period, source: str, zone=None) -> np.ndarray:
    """``_buckets`` of the order check's ``times`` (``_time_order``'s tuple; None for ids), once they are shown to
    be times (``timed``: the table has a time column at all) of the period's kind: dates or durations for a
    duration, numbers for a number; else InputError naming the option. ``zone``: the times' time zone, where whole
    days are the zone's (``_local_days``)."""
    if not timed or times is None:
        what = ("has no time column (name it 'timestamp', or give --time-column NAME)" if not timed else
                "has times that are neither dates nor numbers")
        raise InputError(f"{source}: --resample {period.text}: the table {what}; resampling puts rows on a grid of "
                         "times")
    keys, tick, temporal = times[0], times[1], times[2]
    if temporal and not period.is_duration:
        raise InputError(f"{source}: --resample {period.text}: the times are dates or durations; give the period as a "
                         f"duration, e.g. {period.text}s or {period.text}min")
    if not temporal and period.is_duration:
        raise InputError(f"{source}: --resample {period.text}: the times are numbers, not dates; give the period in "
                         "their units, as a number (e.g. --resample 60 for a minute of epoch seconds)")
    buckets = _buckets(keys, tick, period, source)   # (which refuses times beyond what nanoseconds count)
    if _local_days(period, zone):   # (the same times counted on the zone's wall clock)
        return np.floor_divide(_wall_ns(np.asarray(keys, dtype=np.int64) * tick, zone), period.ns)
    return buckets


def _buckets(keys: np.ndarray, tick: int, period: Period, source: str) -> np.ndarray:
    """(T,) int64: the grid period of each time, counted from the epoch (floor: a time before it in the period
    before)."""
    if period.is_duration:
        if keys.dtype.kind == "u":
            keys = keys.astype(np.int64)
        ns = keys.astype(np.int64)
        if tick != 1:
            limit = np.iinfo(np.int64).max // tick
            if len(ns) and (np.abs(ns).max() > limit):
                raise InputError(f"{source}: --resample {period.text}: times beyond what nanoseconds count (the "
                                 "years 1677-2262)")
            ns = ns * tick
        return np.floor_divide(ns, period.ns)
    number = period.number
    if keys.dtype.kind in "iu" and float(number).is_integer():
        whole = int(number)
        if keys.dtype.kind == "u":
            if len(keys) and keys.max() > np.iinfo(np.int64).max:
                raise InputError(f"{source}: --resample {period.text}: times beyond 2^63")
            keys = keys.astype(np.int64)
        return np.floor_divide(keys, whole)
    return np.floor(keys.astype(np.float64) / number).astype(np.int64)


def _grid_index(first: int, rows: int, period: Period, original: pd.Index) -> pd.Index:
    """The grid's times, each period's start, named ``timestamp``: date-times (in the original's time zone where it
    had one, a period of whole days from the zone's midnights; UTC where the times were text with offsets),
    durations, or numbers (integers where the period and the times are)."""
    from mscred.data.io import TIMESTAMP

    steps = np.arange(first, first + rows, dtype=np.int64)
    if period.is_duration:
        ns = steps * period.ns
        if pd.api.types.is_timedelta64_dtype(original.dtype):
            return pd.TimedeltaIndex(ns, name=TIMESTAMP)
        stamps = pd.DatetimeIndex(ns.view("datetime64[ns]"), name=TIMESTAMP)
        zone = getattr(original, "tz", None)
        if _local_days(period, zone):   # (local midnights: the first of an hour repeated at midnight, or the
            return stamps.tz_localize(zone, ambiguous=np.ones(rows, dtype=bool),   # hour after a skipped one)
                                      nonexistent="shift_forward")
        if zone is not None:
            return stamps.tz_localize("UTC").tz_convert(zone)
        if not pd.api.types.is_datetime64_any_dtype(original.dtype) and _zoned_text(original):
            return stamps.tz_localize("UTC")
        return stamps
    if original.dtype.kind in "iu" and float(period.number).is_integer():
        return pd.Index(steps * int(period.number), name=TIMESTAMP)
    return pd.Index(steps * period.number, name=TIMESTAMP)


def _zoned_text(index: pd.Index) -> bool:
    """Whether date text carries a UTC offset or zone (its times were compared in UTC)."""
    from mscred.data.io import _ZONE

    return bool(len(index)) and bool(_ZONE.search(str(index[0]).strip()))


def _missing_message(parts: Sequence, gaps: np.ndarray, buckets: np.ndarray, starts: np.ndarray, index: pd.Index,
                     period: Period) -> str:
    """The refusal of the first missing value on the grid (``--missing error``): a period without any row, or a
    sensor without a value in its rows; named in the part (file) and rows it concerns. ``buckets``: each row's grid
    row; ``starts``: the first row of each period with rows."""
    from mscred.data.io import short_repr

    row = int(np.flatnonzero(gaps.any(axis=1))[0])
    when = short_repr(index[row])
    hint = "--missing interpolate fills it, or give a longer period"
    offsets = np.cumsum([0] + [len(p.values) for p in parts])

    def place(r: int) -> tuple:   # (the part of the joined row r, and its 1-based row there)
        k = int(np.searchsorted(offsets, r, side="right")) - 1
        return parts[k], r - int(offsets[k]) + 1

    occupied = np.flatnonzero(buckets[starts] == row)
    if not len(occupied):
        after = int(np.searchsorted(buckets, row))   # the first row after the empty period
        part, number = place(after)
        return (f"{part.source}: no row in the {period.text} from {when} (--resample {period.text}; before row "
                f"{number}): a missing value of every sensor; {hint}")
    sensor = parts[0].sensors[int(np.flatnonzero(gaps[row])[0])]
    begin = int(starts[occupied[0]])
    end = int(starts[occupied[0] + 1]) if occupied[0] + 1 < len(starts) else len(buckets)
    part, first = place(begin)
    count = end - begin
    rows = f"row {first}" if count == 1 else f"rows {first}-{first + count - 1}"
    return (f"{part.source}: column '{sensor}': no value in the {period.text} from {when} (--resample "
            f"{period.text}; {rows} there, each missing it); {hint}")


def grid_frame(frame: pd.DataFrame, source: str, after=None) -> pd.DataFrame:
    """``frame`` (read with a resampling ``Reading``: its ``RESAMPLE`` attrs set) as the rows of its grid, a
    ``timestamp`` column of the periods' starts and a column per sensor, missing values NaN (the ``missing`` policy
    decides later, as a feed's chunk is read; a ``label`` column left out). ``after``: the last grid time of the
    rows before (a feed's chunk after the one before): the periods between it and the frame's first are put in as
    rows without values, so that the grid runs on without a hole."""
    from mscred.data.io import KEEP, TIMESTAMP, table_from_frame

    table = table_from_frame(frame, source, missing=KEEP, ignore_label=True)
    period = parse_period(frame.attrs[RESAMPLE])
    index, values = table.index, table.values
    if after is not None:
        first, previous = _bucket_of(index[0], period), _bucket_of(after, period)
        between = first - previous - 1
        if between > 0:   # (none where the frame does not follow: the feed's order check refuses it then)
            if between * max(1, values.shape[1]) > MAX_GRID_CELLS:
                raise InputError(f"{source}: --resample {period.text}: {between:,} periods without rows since the "
                                 f"last row before ({after}); give a longer period")
            empty = _grid_index(previous + 1, between, period, index)
            index = empty.append(index)
            values = np.concatenate([np.full((between, values.shape[1]), np.nan), values])
    out = pd.DataFrame(values, columns=table.sensors)
    out.insert(0, TIMESTAMP, pd.Series(index, index=out.index))
    return out


def _bucket_of(time, period: Period) -> int:
    """The grid period of a grid time (a period's start: a Timestamp, Timedelta or number)."""
    if period.is_duration:
        if isinstance(time, pd.Timestamp) and _local_days(period, time.tz):   # (the zone's days: its wall clock)
            return time.tz_localize(None).as_unit("ns").value // period.ns
        return int(pd.Timestamp(time).value if isinstance(time, (pd.Timestamp, np.datetime64)) else
                   pd.Timedelta(time).value) // period.ns
    return int(round(float(time) / period.number))


def row_periods(frame: pd.DataFrame, period: Period, source: str) -> np.ndarray:
    """(T,) int64: the grid period of each row of ``frame`` (its ``timestamp`` column, checked in order as a table's
    times are), for a feed cut between periods (``mscred.data.grid_feed``)."""
    from mscred.data.io import TIMESTAMP, check_time_order

    timed = TIMESTAMP in frame.columns
    times = check_time_order(pd.Index(frame[TIMESTAMP].to_numpy(), name=TIMESTAMP), source, repeats=True) \
        if timed else None
    zone = getattr(frame[TIMESTAMP].dtype, "tz", None) if timed else None
    return _checked_buckets(times, timed, period, source, zone)
