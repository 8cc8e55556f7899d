"""A long table followed as it grows (``watch`` and ``fleet-watch`` of a model trained with ``--long``): a
historian's or Prometheus' export that a writer appends to, one value a line (time, sensor name, value).

The follower (``GrowingCsv``, ``RollingFolder``) gives the lines completed since its last poll; a time's lines may be
split between two polls (the writer mid-way through them), and a wide row made of half of them would be scored with
the other half missing, then its time would come again. So ``LongFeed`` holds the lines of the last time seen until
a later time arrives, shows them complete (times come in order in a feed: its writer writes each time's values
before the next time's), or until the final poll (the writers have stopped). The lines before are made wide as
``detect`` makes a long table wide (``reading.widened``), a sensor of the model that has no line at a time a
missing value there. A line for a time already passed (a late value) makes a wide row whose time goes back, which
the monitor refuses naming it, as it refuses such a row of a wide feed. ``watch --new-only`` takes the times
complete at its start as history; the last time there is scored as the first new row, once a later one shows it
complete (taken as history, the rest of its lines, if its writer was mid-way through them, would be refused).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.follow import HeldBack
from mscred.data.io import TIMESTAMP, short_repr
from mscred.data.reading import Reading, long_table_columns, missing_text, only_lines_of, widened
from mscred.data.time_zone import ZoneClock, localized

# The index name of a poll's lines numbered as their file numbers them, and the attrs key of (that file, "line" or
# "row"): for messages (LongFeed._numbered)
LINE = "mscred_line"


class LongFeed(HeldBack):
    """``follower``'s lines, read as a long table, polled as wide rows: the interface of a follower that ``watch``
    uses (``poll``, ``where``, ``notes``, ``path``, ``close``), ``release`` besides. ``reading``: the model's (its
    ``long_columns`` set); ``sensors``: the model's, each a column of every wide row."""

    def __init__(self, follower, reading: Reading, sensors: Sequence[str]):
        super().__init__(follower)
        self.reading, self.sensors = reading, list(sensors)
        # The follower reads the lines as they are (the time column renamed, the columns to leave out left out); the
        # missing-value text is made NaN in the wide rows, as detect does it, so that a sensor named like a state is
        # still a sensor
        follower.reading = Reading(time_column=reading.time_column, drop_columns=reading.drop_columns)
        # (local times placed in the model's zone here, as lines: a repeated hour's lines repeat a sensor's time)
        self._clock = ZoneClock()
        self._held: Optional[pd.DataFrame] = None   # the lines of the last time seen, not made wide yet
        self._times = ""    # the times of the wide rows polled last, for ``where``

    @property
    def held(self) -> int:
        """How many lines are held (those of the last time seen)."""
        return 0 if self._held is None else len(self._held)

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The wide rows of the times shown complete since the last poll (with ``final``, every time read), or
        None when there are none."""
        lines, latest = self.follower.poll(final=final), None
        if lines is not None and len(lines):
            # (its columns refused as detect refuses a long table's, before anything here looks for its times)
            long_table_columns(lines, *self.reading.long_columns, str(self._current().path))
            if self.reading.time_zone is not None:
                lines = localized(lines, self.reading.time_zone, str(self._current().path), self._clock,
                                  self.reading.long_columns[0])
            latest = lines[TIMESTAMP].iloc[-1]   # (the last time seen: of any sensor's line)
            # (the model's sensors alone, where it was trained on some: numbered first, as the file numbers them)
            lines = only_lines_of(self._numbered(lines), self.reading.long_columns[0], self.reading.sensors)
            lines = lines if self._held is None else _joined(self._held, lines)
        else:
            lines = self._held
        if lines is None or not len(lines):
            return None
        if final:
            self._held = None
            return self._wide(lines)
        times = lines[TIMESTAMP]
        last = (times == (times.iloc[-1] if latest is None else latest)).to_numpy(dtype=bool)
        self._held = lines[last] if last.any() else None
        return self._wide(lines[~last]) if not last.all() else None

    def stop_note(self) -> Optional[str]:
        """What a watch stopped before a later time came says of the held lines (None when none are held): they
        are in the file but not in its scores."""
        if self._held is None:
            return None
        count, time = len(self._held), short_repr(self._held[TIMESTAMP].iloc[-1])
        return (f"note: {self._current().path}: the last {count} line{'s' if count > 1 else ''} (time {time}) not "
                "scored: no later time came to show them complete (watch --resume goes on from them)")

    def release(self) -> Optional[pd.DataFrame]:
        """The held lines' wide row, taken as complete (``watch --resume``: the last watch scored it at its final
        poll); None when none are held."""
        lines, self._held = self._held, None
        return None if lines is None else self._wide(lines)

    def _current(self):
        """The file followed now (a rolled folder's current one)."""
        return getattr(self.follower, "current", None) or self.follower

    def _numbered(self, lines: pd.DataFrame) -> pd.DataFrame:
        """``lines`` (a poll's) indexed by where they are in their file, for messages: the index named ``LINE``,
        the file and what its rows are (``line`` of a text file, ``row`` of a Parquet part) in ``attrs``; as they
        are where the follower does not say (a blank line skipped: the lines and rows do not pair up)."""
        current = self._current()
        first, last = getattr(current, "lines", None) or (1, getattr(current, "rows", 0))
        if last - first + 1 != len(lines):
            return lines
        named = lines.set_axis(pd.RangeIndex(first, last + 1, name=LINE), axis=0)
        named.attrs[LINE] = (str(current.path), "line" if hasattr(current, "lines") else "row")
        return named

    def _wide(self, lines: pd.DataFrame) -> pd.DataFrame:
        if lines.index.name == LINE:   # (each line named only for a message: a poll may hold a million)
            path, kind = lines.attrs[LINE]
            made = widened(lines, *self.reading.long_columns, path,
                           row_name=lambda position: _line_name(lines.index[position], kind))
        else:   # (its refusals name the lines by their times)
            self._name_times(lines[TIMESTAMP])
            made = widened(lines, *self.reading.long_columns, self.where())
        wide = missing_text(made, self.reading.na_values)
        self._name_times(wide[TIMESTAMP])   # (in order, where the lines' were not)
        absent = [name for name in self.sensors if name not in wide.columns]
        if absent:   # (no line of theirs in these times: missing values, for the missing policy to decide)
            wide = wide.assign(**{name: np.nan for name in absent})
        return wide

    def _name_times(self, times: pd.Series) -> None:
        first, last = short_repr(times.iloc[0]), short_repr(times.iloc[-1])
        self._times = f"time {first}" if first == last else f"times {first} to {last}"

    def where(self, skip: int = 0) -> str:
        """The file followed and the times of the last wide rows polled, as messages name them (their rows are
        named by their times; ``skip`` is the follower's argument, not needed here)."""
        path = self._current().path
        return f"{path} ({self._times})" if self._times else str(path)

def _joined(held: pd.DataFrame, lines: pd.DataFrame) -> pd.DataFrame:
    """The held lines, then the new ones (the reader's ``attrs``, the time column's name for messages, kept). Where
    both say where their lines are (``LongFeed._numbered``), the joined lines do: in one file, by their numbers; in
    two (a time that a rolled folder's files share), each by its text, the held ones' file named."""
    named = held.index.name == LINE and lines.index.name == LINE
    if named and held.attrs[LINE] != lines.attrs[LINE]:
        (path, kind), (_, new_kind) = held.attrs[LINE], lines.attrs[LINE]
        held = held.set_axis(pd.Index([f"{kind} {n} of {path}" for n in held.index], name=LINE), axis=0)
        lines = lines.set_axis(pd.Index([f"{new_kind} {n}" for n in lines.index], name=LINE), axis=0)
    joined = pd.concat([held, lines], ignore_index=not named)
    joined.attrs.update(lines.attrs)
    return joined


def _line_name(where, kind: str) -> str:
    """A line's place in its file: its number (``line 12``), or the text a join across two files gave it."""
    return where if isinstance(where, str) else f"{kind} {where}"


def followed(follower, reading: Reading, sensors: Sequence[str]):
    """What ``watch`` polls for ``follower`` read as a model reads its data (``reading``: the model's with the
    command's options over it): the follower itself, its reading set, or for a long table a ``LongFeed`` of it; put
    on the model's time grid by a ``GridFeed`` where it resamples."""
    if reading.resample is not None:
        from mscred.data.grid_feed import GridFeed

        return GridFeed(followed(follower, dataclasses.replace(reading, resample=None), sensors), reading.resample)
    if reading.long_columns is None:
        follower.reading = reading.followed()   # (one clock for the feed's pieces: a zone's repeated hour)
        return follower
    return LongFeed(follower, reading, sensors)
