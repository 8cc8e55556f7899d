"""A logger's rolled files scored as one feed (``detect DIR``, ``fleet-detect``'s entity folders).

Each file is scored after the rows before it -- the rows of every earlier file, not the previous file alone, whose
few rows (a file rolled early) would leave the next one's first rows without a full window -- with ``detect``'s
context, so that the scores are those of the feed as one table, to within the float32 network's batching (the
files' windows go through in other batches: up to 1.0e-7 relative over five series, as ``detect --context`` of a
split already is: benchmarks/feed_split_diff.py, results/feed_split_diff/).
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import Table


@dataclasses.dataclass
class FeedScores:
    """``frame``: the feed's SCORES table; ``frames``, ``tables`` and ``context_rows``: each file's scores, table and
    rows of context used (``MSCRED.context_rows``)."""

    frame: pd.DataFrame
    frames: list[pd.DataFrame]
    tables: list[Table]
    context_rows: list[int]

    def scored(self, model) -> int:
        """How many of the feed's rows a window covers (the others score 0)."""
        return sum(int((model.window_of_row(len(part), rows) >= 0).sum())
                   for part, rows in zip(self.frames, self.context_rows))


def feed_tables(paths: Sequence, context=None, **read_options) -> tuple[Optional[Table], Iterator[Table]]:
    """(the table at ``context`` or None, the tables at ``paths`` loaded as they are needed): a feed's files read
    with ``read_options`` (``load_table``'s), the first before the context (its errors first). Where the reading
    resamples and there is more than one file, all are read at once and put on one grid, as one table would be (a
    period may span a seam: ``mscred.data.resample.load_on_grid``); a file left without rows of its own is left
    out."""
    from mscred.data.io import load_table

    if read_options["reading"].resample is not None and (context or len(paths) > 1):
        from mscred.data.resample import load_on_grid

        on_grid = load_on_grid([*([context] if context else []), *paths], **read_options)
        before = on_grid.pop(0) if context else None
        return (before if before is not None and len(before.values) else None,
                iter([table for table in on_grid if len(table.values)]))
    first = load_table(paths[0], **read_options)   # (DATA's errors first)
    before = load_table(context, **read_options) if context else None
    return before, itertools.chain([first], (load_table(path, **read_options) for path in paths[1:]))


def score_feed(model, tables: Iterable[Table], context: Optional[Table] = None,
               sensor_scores: bool = False) -> FeedScores:
    """``tables`` (a feed's files in order, loaded as they are needed) scored by ``model`` one after the other, the
    first after ``context`` when given, each next one after the rows before it."""
    sig = model.config_.signature
    keep = max(sig.windows) + sig.steps * sig.gap   # (more context than any file can use)
    frames, loaded, used = [], [], []
    for table in tables:
        frames.append(model.detect(table, context=context, sensor_scores=sensor_scores))
        used.append(model.context_rows(len(context.values), len(table.values)) if context is not None else 0)
        loaded.append(table)
        context = _followed(context, table, keep)
    return FeedScores(_one_feed(frames), frames, loaded, used)


def _followed(before: Optional[Table], table: Table, keep: int) -> Table:
    """The last ``keep`` rows of ``before`` (a Table, or None) and ``table``'s after them, as one Table: the context
    of a folder's next file, however short its files (the one before alone may hold fewer rows than a window).
    Timestamps are kept where both have them (detect checks the next file's first against the last); untimed rows
    are counted from 0. Tables of other sensor names (a positional .npy beside a CSV) are not joined."""
    if before is None or set(before.sensors) != set(table.sensors):
        return table.last(keep)
    table = table.in_order(before.sensors)
    values = np.concatenate([before.values, table.values])
    timed = not isinstance(before.index, pd.RangeIndex) and not isinstance(table.index, pd.RangeIndex)
    gaps = None
    if before.gaps is not None or table.gaps is not None:
        gaps = np.concatenate([t.gaps if t.gaps is not None else np.zeros(t.values.shape, dtype=bool)
                               for t in (before, table)])
    joined = dataclasses.replace(table, values=values, labels=None, gaps=gaps, time_gap=None,
                                 index=before.index.append(table.index) if timed else pd.RangeIndex(len(values)))
    return joined.last(keep)


def _one_feed(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The SCORES tables of a folder's files as one feed's: untimed rows numbered through the files (each file's
    own count from 0 would repeat), timed ones as they are."""
    if len(frames) == 1:
        return frames[0]
    if "row" in frames[0].columns:
        starts = np.cumsum([0] + [len(f) for f in frames[:-1]])
        frames = [f.assign(row=f["row"] + start) for f, start in zip(frames, starts)]
    return pd.concat(frames, ignore_index=True)
