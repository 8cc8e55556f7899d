"""Local times read in a time zone (``--time-zone Europe/Berlin``; ``Reading.time_zone``, ``TrainConfig.time_zone``).

A plant historian or a SCADA often exports its times as the site's wall clock, without a UTC offset. Once a year
the clocks go back and an hour of wall times comes twice (02:00-02:59 in Central Europe on the last Sunday of
October): read as they are, those rows are "earlier than the row before" and the table is refused, and a year's
export always holds that hour. Given the zone, each wall time becomes the instant it names, as a date-time with its
offset (``2026-10-25 02:10:00+01:00``), so the rows are in order and every reader downstream -- the order check, the
resampling grid, SCORES.csv -- sees real time.

The repeated hour's wall times name two instants each. Which one a row is told by order, as ``tz_localize(...,
ambiguous="infer")`` does, but row by row (pandas' inference refuses a long table's many lines a time and more than
one change in a run of ambiguous rows): within a run of consecutive rows in the repeated hour, rows are the first pass
(summer time) until the row that would otherwise be earlier than the row before -- the clock went back -- or, in a
wide table, repeat its time, or, in a long table, repeat a sensor's time (of several such rows, the one stepping back
farthest: a row out of order or repeated in the table steps back less than the change, and is then refused by the
order check at its row); that row and the rest of the run are the second pass. A run without such a row is the first
pass (Python's ``fold=0``). A followed feed's pieces (``watch``) carry the last instant read across their seams
(``ZoneClock``), so a piece that begins in the second pass is read as such. A wall time the clocks skip (the spring
change's missing hour) names no instant and is refused at its row.

Times written with an offset (``+02:00``, ``Z``) or read as zoned date-times are exact already: they are shown in
the zone. Times that are numbers (epoch seconds) or row ids are no wall times and are refused with ``--time-zone``.
"""
from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from mscred.data.io import TIMESTAMP, date_text_times, short_repr, time_label
from mscred.errors import InputError


def checked_zone(name: str) -> str:
    """``name`` where it is an IANA time zone known here (``Europe/Berlin``, ``America/Chicago``, ``UTC``), else
    InputError saying so (the tz database: pandas' tzdata dependency, or the system's)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise InputError(f"time zone {name!r}: not a time zone known here; give an IANA name such as "
                         "'Europe/Berlin', 'America/Chicago' or 'UTC'") from None
    return name


@dataclass
class ZoneClock:
    """The last instant (UTC nanoseconds) a followed feed's pieces were read up to, so that the next piece's rows in
    the repeated hour are told apart against it (``localized``). None before the first piece."""

    last: Optional[int] = None

    def set_after(self, times: Optional[pd.Index]) -> None:
        """Read on after ``times`` (a feed's rows so far, as read: ``Monitor``'s), where they are zoned date-times."""
        if isinstance(times, pd.DatetimeIndex) and times.tz is not None and len(times):
            self.last = int(times[-1:].as_unit("ns").asi8[0])


def localized(df: pd.DataFrame, zone: str, source: str, clock: Optional[ZoneClock] = None,
              sensor_column: Optional[str] = None) -> pd.DataFrame:
    """``df`` with its ``timestamp`` column (or, for a Python caller's frame without one, its date-time index) as
    date-times in ``zone``: wall times without an offset placed in the zone (the repeated hour told apart by order,
    see the module's docstring), zoned ones converted. ``df`` itself where it has no time, or a missing time (its
    row is refused by the order check, as without a zone). ``sensor_column``: a long table's (a repeated hour's rows
    repeat a sensor, not a time, when the clock goes back). ``clock``: a followed feed's, read and advanced."""
    in_column = TIMESTAMP in df.columns
    if in_column:
        times = pd.Index(df[TIMESTAMP])
    elif isinstance(df.index, pd.DatetimeIndex):
        times = df.index
    else:
        return df
    if len(times) == 0 or times.isna().any():
        return df
    where = f"{source}: {time_label(df) if in_column else 'the index'}"
    instants = _instants(times, zone, where, df, sensor_column, clock)
    zoned = pd.DatetimeIndex(instants.astype("datetime64[ns]")).tz_localize("UTC").tz_convert(zone)
    if clock is not None:
        clock.last = int(instants[-1])
    if not in_column:
        out = df.set_axis(zoned.rename(df.index.name), axis=0)
    else:
        out = df.copy(deep=False)
        out[TIMESTAMP] = zoned
    out.attrs.update(df.attrs)
    return out


def placed_alone(times: pd.Index, zone: str, where: str) -> pd.DatetimeIndex:
    """Date-times each read alone in ``zone``, as UTC (an anomalies table's start and end: events in any order, so no
    order tells a repeated hour's two passes apart): wall times placed in the zone, zoned ones exact; a wall time of
    the repeated hour (two instants) or one the clocks skip (none) is refused at its row, naming the offsets."""
    nanoseconds, zoned = _nanoseconds(times, where)
    if zoned:
        return pd.DatetimeIndex(nanoseconds.astype("datetime64[ns]")).tz_localize("UTC")
    naive = pd.DatetimeIndex(nanoseconds.astype("datetime64[ns]"))
    first = naive.tz_localize(zone, ambiguous=np.ones(len(naive), dtype=bool), nonexistent="NaT")
    second = naive.tz_localize(zone, ambiguous=np.zeros(len(naive), dtype=bool), nonexistent="NaT")
    skipped = np.asarray(first.isna())
    bad = np.flatnonzero(skipped | (first.asi8 != second.asi8))
    if len(bad):
        r = int(bad[0])
        if skipped[r]:
            raise InputError(f"{where} row {r + 1}: {short_repr(times[r])} is no time in {zone} (the clocks skip it "
                             "when summer time begins); were the times written in another zone, or in UTC?")
        offsets = [stamp.isoformat()[-6:] for stamp in (first[r], second[r])]   # ('+02:00', '+01:00')
        raise InputError(f"{where} row {r + 1}: {short_repr(times[r])} comes twice in {zone} (the clocks go back): "
                         f"write it with its offset, {offsets[0]} (the first time) or {offsets[1]} (the second)")
    return first.tz_convert("UTC")


def _instants(times: pd.Index, zone: str, where: str, df: pd.DataFrame, sensor_column: Optional[str],
              clock: Optional[ZoneClock]) -> np.ndarray:
    """The UTC nanoseconds of ``times`` read in ``zone`` (``localized``)."""
    nanoseconds, zoned = _nanoseconds(times, where)
    if zoned:
        return nanoseconds
    return _placed(nanoseconds, zone, where, times, _repeat_keys(df, sensor_column, len(nanoseconds)), clock)


def _nanoseconds(times: pd.Index, where: str) -> tuple[np.ndarray, bool]:
    """(int64 nanoseconds of ``times``, whether they are UTC instants already -- zoned date-times, text with an
    offset -- rather than wall times counted as if UTC); InputError for numbers, durations and text of no date."""
    if pd.api.types.is_datetime64_any_dtype(times.dtype):
        stamps = pd.DatetimeIndex(times).as_unit("ns")
        if stamps.tz is not None:
            return stamps.tz_convert("UTC").asi8, True
        return stamps.asi8, False
    if pd.api.types.is_numeric_dtype(times.dtype) or pd.api.types.is_bool_dtype(times.dtype) \
            or pd.api.types.is_timedelta64_dtype(times.dtype):
        raise InputError(f"{where} holds {'durations' if times.dtype.kind == 'm' else 'numbers'}, not date-times: "
                         "--time-zone reads local date-times written without a UTC offset; leave it out")
    read = date_text_times(times, where)
    if read is None:
        raise InputError(f"{where}: value {short_repr(times[0])} is no date-time: --time-zone reads local "
                         "date-times written without a UTC offset; leave it out")
    keys, tick, zoned = read
    return keys.astype(np.int64) * tick, zoned


def _repeat_keys(df: pd.DataFrame, sensor_column: Optional[str], rows: int) -> Optional[np.ndarray]:
    """A long table's sensor of each row as a code (its lines repeat a time; a sensor's time repeats when the clock
    goes back), or None for a wide table (a repeated time is the clock going back)."""
    if sensor_column is None:
        return None
    names = [str(c).strip() for c in df.columns]
    if sensor_column not in names:
        return None
    codes, _ = pd.factorize(df.iloc[:, names.index(sensor_column)].astype(str).str.strip())
    return codes.astype(np.int64) if len(codes) == rows else None


def _placed(wall: np.ndarray, zone: str, where: str, times: pd.Index, sensors: Optional[np.ndarray],
            clock: Optional[ZoneClock]) -> np.ndarray:
    """UTC nanoseconds of the wall times ``wall`` (nanoseconds, as if UTC) in ``zone``: each wall time's first pass
    unless order says the second (``localized``); InputError at a wall time the clocks skip."""
    naive = pd.DatetimeIndex(wall.astype("datetime64[ns]"))
    first = naive.tz_localize(zone, ambiguous=np.ones(len(wall), dtype=bool), nonexistent="NaT")
    skipped = np.flatnonzero(first.isna())
    if len(skipped):
        r = int(skipped[0])
        raise InputError(f"{where} row {r + 1}: {short_repr(times[r])} is no time in {zone} (the clocks skip it "
                         "when summer time begins); were the times written in another zone, or in UTC?")
    second = naive.tz_localize(zone, ambiguous=np.zeros(len(wall), dtype=bool)).asi8
    first = first.asi8
    chosen = first.copy()
    twice = first != second
    if not twice.any():
        return chosen
    # runs of consecutive rows in a repeated hour: [starts[i], ends[i])
    edges = np.diff(np.concatenate(([0], twice.view(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    for start, end in zip(starts, ends):
        before = chosen[start - 1] if start > 0 else (clock.last if clock is not None else None)
        run = first[start:end]
        previous = np.concatenate(([np.iinfo(np.int64).min if before is None else before], run[:-1]))
        # a wide table's row never shares its time with the row before; a long table's lines do
        back = run < previous if sensors is not None else run <= previous
        if sensors is not None:
            back |= pd.DataFrame({"t": wall[start:end], "s": sensors[start:end]}).duplicated().to_numpy()
        if back.any():
            # Where the clock went back: the row stepping back farthest (the change steps back by about an hour
            # less a step; a row out of order or repeated in the table, by less), so that the order check then
            # names that row rather than the change
            steps = np.where(back, run.astype(np.float64) - previous, np.inf)
            at = start + int(np.argmin(steps))
            chosen[at:end] = second[at:end]
    return chosen
