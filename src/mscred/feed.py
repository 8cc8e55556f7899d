"""A logger's rolled files scored as one feed (``detect DIR``, ``fleet-detect``'s entity folders).

The files are joined into one table -- their rows one after the other, the times checked to follow each other across
each seam (``mscred.data.context.seam_note``), gaps that touch a seam filled across it -- and scored as one, after
``detect``'s context when given: the scores are those of ``detect`` of the files concatenated, whatever their lengths.
(Scored file by file, each after the rows before it, a file's windows ended at its own last row: a later file whose
length was not a multiple of the gap was scored on windows shifted from the whole table's, and the last rows of the
first file scored 0.) The feed is in memory at once, as one file of its rows would be.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import Table


@dataclasses.dataclass
class FeedScores:
    """``frame``: the feed's SCORES table; ``tables``: each file's table, as read; ``context_rows``: the rows of
    context put before the feed (``MSCRED.context_rows``; 0 without)."""

    frame: pd.DataFrame
    tables: list[Table]
    context_rows: int

    def scored(self, model) -> int:
        """How many of the feed's rows a window covers (the others score 0)."""
        return int((model.window_of_row(len(self.frame), self.context_rows) >= 0).sum())


def feed_tables(paths: Sequence, context=None, **read_options) -> tuple[Optional[Table], list[Table]]:
    """(the table at ``context`` or None, the tables at ``paths``): a feed's files read with ``read_options``
    (``load_table``'s), the first before the context (its errors first). Where there is more than one file and the
    reading resamples, all are put on one grid, as one table would be (a period may span a seam:
    ``mscred.data.resample.load_on_grid``; a file left without rows of its own is left out); where missing values
    are filled (the policy, or sensors held whatever it says: ``Reading.hold``), they are filled as in one table
    (``filled_as_one``)."""
    from mscred.data.io import KEEP, load_table

    several = [*([context] if context else []), *paths]
    reading, missing = read_options.get("reading"), read_options["missing"]
    if len(several) > 1 and reading is not None and reading.time_zone is not None:
        # Local times: one clock through the files in time order, so that a file that starts in the hour the clocks
        # go back, past its first pass, reads as the second (mscred.data.time_zone); read in that order below
        read_options = {**read_options, "reading": reading.followed()}
    held = reading is not None and bool(reading.hold)
    if len(several) > 1 and ((reading is not None and reading.resample is not None) or missing != "error" or held):
        if reading is not None and reading.resample is not None:
            from mscred.data.resample import load_on_grid

            tables = load_on_grid(several, **read_options)
        else:   # (gaps filled as in one table: across the seams, and a sensor missing in a whole file)
            tables = [load_table(path, **{**read_options, "missing": KEEP}) for path in several]
            if missing == "error":   # (only held sensors may have gaps: another's refused at its cell, as alone)
                for path, table in zip(several, tables):
                    if np.isnan(table.values[:, [name not in table.held for name in table.sensors]]).any():
                        load_table(path, **{**read_options, "reading": reading})
            tables = filled_as_one(tables, missing)
        before = tables.pop(0) if context else None
        return (before if before is not None and len(before.values) else None,
                [table for table in tables if len(table.values)])
    if len(several) > 1 and reading is not None and reading.time_zone is not None:
        tables = [load_table(path, **read_options) for path in several]
        return (tables.pop(0) if context else None), tables
    first = load_table(paths[0], **read_options)   # (DATA's errors first)
    before = load_table(context, **read_options) if context else None
    return before, [first] + [load_table(path, **read_options) for path in paths[1:]]


def score_feed(model, tables: Iterable[Table], context: Optional[Table] = None,
               sensor_scores: bool = False) -> FeedScores:
    """``tables`` (a feed's files in order) scored by ``model`` as one table (``one_series``), after ``context``
    when given."""
    from mscred.data.context import one_series

    loaded = list(tables)
    feed = dataclasses.replace(one_series(loaded, "the files of a feed"), labels=None)
    frame = model.detect(feed, context=context, sensor_scores=sensor_scores)
    used = model.context_rows(len(context.values), len(feed.values)) if context is not None else 0
    return FeedScores(frame, loaded, used)


def filled_as_one(parts: Sequence[Table], how: str = "interpolate") -> list[Table]:
    """Tables read with their missing values kept (``KEEP``), one after the other (a context, then a feed's files),
    filled (``how``: the missing policy, "interpolate" or "hold") as one table of their rows fills them -- across
    the seams, and a sensor missing in a whole file from the values around it -- and cut into the same tables
    again, each with its ``gaps`` and ``filled``. Sensors in the first's order (other sensors refused, naming the
    file). ``how`` "error": only the held sensors (``Table.held``) have gaps, and are filled."""
    from mscred.data.io import FILLING, fill_missing
    from mscred.data.parts import in_order_of

    first = parts[0]
    parts = [first] + [in_order_of(first, part, "the files of a feed") for part in parts[1:]]
    values = np.concatenate([part.values for part in parts])
    gaps = np.isnan(values)
    if gaps.any():
        fill_missing(values, gaps, first.sensors, first.source, how, first.held)   # (in place)
    offsets = np.cumsum([0] + [len(part.values) for part in parts])
    out = []
    for part, start, stop in zip(parts, offsets, offsets[1:]):
        own = gaps[start:stop]
        out.append(dataclasses.replace(part, values=values[start:stop], gaps=own if own.any() else None,
                                       filled={name: int(n) for name, n in zip(first.sensors, own.sum(axis=0)) if n},
                                       filled_by=how if how in FILLING and own.any() else None))
    return out
