"""A live feed scored as it arrives (``MSCRED.monitor()``): chunk after chunk, any size, one row at a time too.

``detect(X, context=before)`` scores every row of X when the caller keeps ``before``; a feed that delivers a few
rows at a time would have to keep enough of them itself, join short chunks until a window fits, and number rows
without timestamps across chunks. ``Monitor`` keeps that tail: each ``update(chunk)`` is ``detect(chunk,
context=rows seen before it)``, so every row is scored once the feed has given one window's rows
(``model.min_rows``: 100 at the defaults), and the rows before that score 0 as rows no window covers do.

The tail kept is the most rows ``context_rows`` takes (99 at the defaults), reaching further back to a row where
every sensor is present when the model fills missing values (``missing="interpolate"``), so that a gap is filled
between the same two values as in the whole feed (up to ``MAX_HISTORY_FACTOR`` tails: past that, the oldest value
kept is held flat). A value missing at the end of a chunk is held at its last value: the next is not known yet.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from mscred.config import MISSING_POLICIES
from mscred.data.context import SEAM_ROWS, seam_note
from mscred.data.io import LABEL, TIMESTAMP, Table
from mscred.data.rate import rated
from mscred.data.reading import Reading
from mscred.data.resample import RESAMPLE, grid_frame
from mscred.detector import SENSOR_SCORE_PREFIX, index_column
from mscred.errors import InputError

# How far back the tail may reach for a row with every sensor present, in tails (see the module's docstring).
MAX_HISTORY_FACTOR = 10


class Monitor:
    """Scores a feed chunk by chunk with a fitted ``model`` (``model.monitor()``). Part of the model kept in a file
    of its own: it reads chunks with the model's own private readers (``_scoring_table``, ``_in_training_order``),
    so that a chunk is checked exactly as ``detect`` checks X.

    ``update(chunk)`` takes what ``detect`` takes (a DataFrame with or without a ``timestamp`` column, a 2-D array
    or a list of rows, in the training sensors' order for the latter two) and returns ``detect``'s frame for the
    chunk's rows, ``sensor_scores`` columns too when asked. ``missing`` ("error", "interpolate" or "hold"): what a
    missing value in the feed gets, the model's ``missing`` setting unless given (its ``hold_sensors`` held whatever
    it says). Rows without timestamps are numbered
    across the feed, from 0 (a chunk's own row numbers are not used: every new DataFrame would restart them). A
    chunk that fails (bad input, times that do not follow the rows before) raises InputError and leaves the
    monitor as it was. A model trained on a long table (``long_columns``) takes long chunks too, each made wide
    on its own: a chunk holds each of its times' values whole (a time split between two chunks comes twice, and
    is refused the second time); ``mscred.data.long_feed.LongFeed`` cuts a growing file so. A model that resamples
    (``resample``) puts each chunk on its grid, on from the last period seen (the periods without rows between two
    chunks become rows of missing values, for ``missing`` to decide); a chunk holds whole periods, as a long one
    holds whole times (``mscred.data.grid_feed.GridFeed`` cuts a growing file so).
    """

    def __init__(self, model, sensor_scores: bool = False, missing: Optional[str] = None):
        model._current()
        self.model, self.sensor_scores = model, sensor_scores
        self.missing = missing or model._settings().train.missing
        if self.missing not in MISSING_POLICIES:
            raise InputError(f"missing={self.missing!r}: choose one of {', '.join(MISSING_POLICIES)}")
        gap = model.config_.signature.gap
        # context_rows depends on the chunk's length only modulo gap: the most it takes, whatever the chunk
        self.tail_rows = max(model.context_rows(np.iinfo(np.int64).max, length) for length in range(1, gap + 1))
        # One row more for the counters given as rates (train.rate_sensors): the oldest row scored takes its
        # increase from the row before it
        self.tail_rows += bool(model._settings().train.rate_sensors)
        self.rows_seen = 0
        self._history = None   # DataFrame: the feed's last rows, as given (timestamps a column, sensors by name)
        self._times = None     # the index of its last SEAM_ROWS rows as read, for the seam's checks

    @property
    def fills(self) -> bool:
        """Whether missing values of the feed are filled: by the policy, or those of sensors held whatever it says
        (the model's ``hold_sensors``)."""
        return self.missing != "error" or bool(self.model._settings().train.hold_sensors)

    def update(self, chunk, source: str = "chunk") -> pd.DataFrame:
        """``detect``'s frame for ``chunk``'s rows, scored after the rows the monitor has seen; ``source`` names
        the chunk in errors (``mscred watch``: the file and its lines)."""
        frame = self._frame(chunk, source)
        table = self._checked(frame, source)
        joined = self._with_tail(frame)
        available = len(joined) - len(frame)
        if len(joined) >= self.model.min_rows:
            # The tail and the chunk read as one table, so that a gap is filled across the seam (and a sensor
            # missing in the whole chunk, as in a chunk of one row, from the values before it); then detect's
            # context rows of it and the chunk, the windows counted back from the chunk's last row.
            rows = self.model.context_rows(available, len(frame))
            whole = self.model._scoring_table(joined, source, missing=self.missing) if available else table
            # (the counters' rates over the tail and the chunk as one, before the rows scored are cut from them)
            whole = rated(whole, self.model._settings().train.rate_sensors, self.model.rates_per_second)
            found = self.model.detect(whole.last(rows + len(frame)), sensor_scores=self.sensor_scores)
            found = found.iloc[rows:].reset_index(drop=True)
            if index_column(table) == "row":
                found["row"] = frame.index.to_numpy()
        else:
            found = self._unscored(frame, table)
        self._advance(frame, table, joined)
        return found

    def prime(self, chunk, source: str = "chunk") -> None:
        """Take ``chunk`` as the feed's rows so far without scoring them (checked as ``update`` checks a chunk):
        the rows already scored before a restart (``mscred watch --resume``), or history to score after."""
        frame = self._frame(chunk, source)
        self._advance(frame, self._checked(frame, source), self._with_tail(frame))

    def columns(self, index_name: str) -> list[str]:
        """The columns of what ``update`` returns, in order, after the ``index_name`` column ("timestamp" or
        "row"): ``detect``'s."""
        names = [index_name, "score", "is_anomaly", "root_causes", "scales"]
        return names + ([SENSOR_SCORE_PREFIX + s for s in self.model.sensors_] if self.sensor_scores else [])

    def _with_tail(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The tail kept so far, then ``frame``."""
        return frame if self._history is None else pd.concat([self._history, frame])

    def _advance(self, frame: pd.DataFrame, table, joined: pd.DataFrame) -> None:
        """The feed after ``frame`` (read as ``table``; ``joined``: ``_with_tail(frame)``): the tail kept, the seam's
        times, the rows counted."""
        self._keep(joined)
        timed = not isinstance(table.index, pd.RangeIndex)   # (row numbers: nothing to check, a RangeIndex kept)
        recent = table.index if self._times is None or not timed else self._times.append(table.index)
        self._times = recent[-SEAM_ROWS:]
        self.rows_seen += len(frame)

    def _checked(self, frame: pd.DataFrame, source: str):
        """The chunk read as ``detect`` reads X (its errors name the chunk's own rows), and shown to follow the
        rows before it. A sensor missing in every row of the chunk can be filled from the rows before it, so for
        this check alone it reads as present."""
        check = frame
        if self._history is not None and self.fills:
            held = self.model._settings().train.hold_sensors
            empty = [c for c in frame.columns if c not in (TIMESTAMP, LABEL) and frame[c].isna().all()
                     and (self.missing != "error" or c in held)]
            check = frame.assign(**{c: 0.0 for c in empty}) if empty else frame
        table = self.model._in_training_order(self.model._scoring_table(check, source, missing=self.missing))
        if self._times is not None:
            seam_note(Table(np.empty((len(self._times), 0)), [], self._times), table, feed=True)
        return table

    def _frame(self, chunk, source: str) -> pd.DataFrame:
        """The chunk as a DataFrame of named sensors; without timestamps, numbered from the rows seen so far."""
        if isinstance(chunk, (list, tuple)):
            chunk = np.asarray(chunk, dtype=np.float64)
        if isinstance(chunk, np.ndarray):
            if chunk.ndim != 2 or chunk.shape[1] != len(self.model.sensors_):
                raise InputError(f"{source}: an array of shape {chunk.shape}; the model takes rows of "
                                 f"{len(self.model.sensors_)} sensors, in their training order")
            chunk = pd.DataFrame(chunk, columns=self.model.sensors_)
        if not isinstance(chunk, pd.DataFrame):
            raise InputError(f"{source}: expected a DataFrame or a 2-D array of rows, got {type(chunk).__name__}")
        if len(chunk) == 0:
            raise InputError(f"{source}: no rows")
        # Names as the reader strips them (' s1' is s1), so that the tail and the next chunk line up by name; then
        # read as the model reads its data (its time column, missing-value text, long table: mscred.data.reading)
        # before anything here looks for the time or for missing values
        chunk = chunk.set_axis([str(c).strip() for c in chunk.columns], axis=1)
        reading = Reading.of_model(self.model._settings().train)
        if reading.time_zone is not None:   # (a chunk in the hour the clocks go back, told apart from the last time)
            reading = reading.followed()
            reading.clock.set_after(self._times)
        chunk = reading.frame(chunk, source, strict=False)
        if chunk.attrs.get(RESAMPLE) is not None:   # (a model that resamples: the chunk as grid rows, on from the last)
            chunk = grid_frame(chunk, source, after=None if self._times is None else self._times[-1])
        if TIMESTAMP not in chunk.columns and isinstance(chunk.index, pd.RangeIndex):
            chunk = chunk.set_axis(pd.RangeIndex(self.rows_seen, self.rows_seen + len(chunk)), axis=0)
        return chunk

    def _unscored(self, frame: pd.DataFrame, table) -> pd.DataFrame:
        """``detect``'s columns for rows no window covers yet: score 0, not anomalous (sensor scores NaN)."""
        rows = len(frame)
        index_name = index_column(table)
        found = pd.DataFrame({index_name: frame.index.to_numpy() if index_name == "row" else np.asarray(table.index),
                              "score": np.zeros(rows), "is_anomaly": np.zeros(rows, dtype=np.int64),
                              "root_causes": [""] * rows, "scales": [""] * rows})
        return found.reindex(columns=self.columns(index_name))   # (the sensor scores' columns: NaN)

    def _keep(self, joined: pd.DataFrame) -> None:
        """The tail after the chunk: the last ``tail_rows`` rows of ``joined`` (the tail before it and the chunk),
        from the last row before them with every sensor present when missing values are filled (within
        MAX_HISTORY_FACTOR tails)."""
        start = max(0, len(joined) - self.tail_rows)
        if self.fills and start > 0:
            values = joined[[c for c in joined.columns if c not in (TIMESTAMP, LABEL)]]
            complete = np.flatnonzero(values.iloc[:start + 1].notna().all(axis=1).to_numpy())
            earliest = max(0, len(joined) - MAX_HISTORY_FACTOR * self.tail_rows)
            start = max(int(complete[-1]) if len(complete) else 0, earliest)
        self._history = joined.iloc[start:]
