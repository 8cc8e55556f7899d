"""A series scored as the continuation of the rows before it (``MSCRED.detect(X, context=...)``, ``mscred detect
--context``).

A window needs max(windows) + (steps - 1) x gap rows, so a file scored alone leaves its first rows without a score
(90 at the defaults): a feed scored file by file (an hour, a day at a time) had a blind spot at the start of every
file. Given the rows that came just before it (the feed's previous file), the windows over those rows are complete.
``continued`` puts the two together once they are shown to be one series: both with timestamps or neither, the times
increasing across the seam, and gaps that touch the seam filled across it as in one table.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import TIMESTAMP, Table, check_time_order, largest_time_gap, short_repr
from mscred.errors import InputError

# Rows each side of the seam whose times are read for its checks: enough for a usual (median) step to judge a jump.
SEAM_ROWS = 50


def _has_times(table: Table) -> bool:
    return not isinstance(table.index, pd.RangeIndex)


def seam_note(context: Table, table: Table, feed: bool = False) -> Optional[str]:
    """Check that ``table`` continues ``context`` (both with timestamps or neither; the first time of ``table``
    later than the last of ``context``), and return a note where the time jumps across the seam by more than 10
    usual steps (windows count rows, not time: the first windows then join both sides), else None. ``feed``: the
    errors name ``context`` as a feed's earlier rows (``Monitor``), not as a file given as context.

    Raises
    ------
    InputError
        One has timestamps and the other none, or the times do not increase across the seam.
    """
    if _has_times(context) != _has_times(table):
        if feed:
            has = "has timestamps; the feed's earlier rows have none" if _has_times(table) else \
                f"has no '{TIMESTAMP}' column; the feed's earlier rows have one"
            raise InputError(f"{table.source}: {has}: a feed's rows must all have timestamps or none")
        timed, plain = (context, table) if _has_times(context) else (table, context)
        raise InputError(f"{plain.source}: no '{TIMESTAMP}' column, while {timed.source} has one; the data and its "
                         "context must both have timestamps or neither")
    if not _has_times(table):
        return None
    tail, head = context.index[-SEAM_ROWS:], table.index[:SEAM_ROWS]
    try:
        times = check_time_order(tail.append(head), table.source)
    except (InputError, TypeError, ValueError):
        # Each alone is in order (read and checked already), so the seam is what fails: a time at or before the
        # context's last, or one that does not compare with it (another kind of time, another date format)
        if feed:
            raise InputError(f"{table.source}: its first timestamp {short_repr(head[0])} does not follow the feed's "
                             f"last ({short_repr(tail[-1])}); a feed's times must increase") from None
        raise InputError(f"{table.source}: its first timestamp {short_repr(head[0])} does not follow the last of its "
                         f"context {context.source} ({short_repr(tail[-1])}); the context must be the rows just "
                         "before the data") from None
    if times is None:   # ids, not times: in order, but no step to judge
        return None
    gap = largest_time_gap(*times[:3], at=len(tail))
    if gap is None:
        return None
    return (f"{table.source}: the time jumps by {gap[1]} from the last row of its context {context.source} to its "
            f"first row (the usual step is {gap[2]}); windows count rows, not time, so the first windows join the "
            "rows on both sides")


def continued(context: Table, table: Table, rows: int) -> np.ndarray:
    """The last ``rows`` rows of ``context`` then every row of ``table``, (rows + T, n) float64, once
    ``seam_note``'s checks pass. Both tables' columns must be the same sensors in the same order.

    Values that were filled (``Table.gaps``) in a run that touches the seam -- the context's last rows, the table's
    first -- are filled again across it, as one table of both would have them (each alone held its end value flat):
    interpolated between the last present value before the seam and the first after, or held at the last one before
    it (``Table.filled_by`` "hold", or a sensor of ``Table.held``); other values are as read."""
    seam_note(context, table)
    start = len(context.values) - rows
    values = np.concatenate([context.values[start:], table.values])
    if context.gaps is None and table.gaps is None:
        return values
    for j in range(values.shape[1]):
        before = _run_length(context.gaps, j, from_end=True)    # filled rows that end the context
        after = _run_length(table.gaps, j, from_end=False)      # filled rows that start the table
        if not before and not after:
            continue
        # Full-context row numbers: the last present value is at len - before - 1, the first after the seam at
        # len + after. A side with no present value at all (a file of a feed filled as one table with the others,
        # mscred.feed.filled_as_one) is held at the other side's value, as one table's ends are
        left, right = len(context.values) - before - 1, len(context.values) + after
        filled = np.arange(max(left + 1, start), right)
        low = context.values[left, j] if left >= 0 else table.values[after, j]
        high = table.values[after, j] if after < len(table.values) else low
        name = table.sensors[j]
        if context.fills_by_holding(name) or table.fills_by_holding(name):   # (the value before the seam, on)
            values[filled - start, j] = low
        else:
            values[filled - start, j] = np.interp(filled, [left, right], [low, high])
    return values


def _run_length(gaps: Optional[np.ndarray], column: int, from_end: bool) -> int:
    """How many consecutive True values of ``gaps[:, column]`` start (or, ``from_end``, end) it; 0 without gaps."""
    if gaps is None:
        return 0
    run = gaps[::-1, column] if from_end else gaps[:, column]
    return len(run) if run.all() else int(np.argmin(run))


def one_series(tables: Sequence[Table], together: str) -> Table:
    """Tables of one series, one after the other (a feed's files; a context and the data), as one Table: the
    sensors in the first's order (other sensors refused, naming the table: ``in_order_of``; ``together`` says what
    the tables are), the times checked across each seam (``seam_note``: in order, all timed or none), values, gaps,
    labels (0 where a table has none) and filled counts joined, the index the tables' times appended (the rows
    numbered from 0 where they have none). Named as the first; the notes of one table alone dropped."""
    from mscred.data.parts import in_order_of

    if len(tables) == 1:
        return tables[0]
    first = tables[0]
    tables = [first] + [in_order_of(first, table, together) for table in tables[1:]]
    for before, after in zip(tables, tables[1:]):
        seam_note(before, after)
    values = np.concatenate([table.values for table in tables])
    gaps = labels = None
    if any(table.gaps is not None for table in tables):
        gaps = np.concatenate([table.gaps if table.gaps is not None else np.zeros(table.values.shape, dtype=bool)
                               for table in tables])
    if any(table.labels is not None for table in tables):
        labels = np.concatenate([table.labels if table.labels is not None
                                 else np.zeros(len(table.values), dtype=np.int64) for table in tables])
    index = first.index.append([table.index for table in tables[1:]]) if _has_times(first) else \
        pd.RangeIndex(len(values))
    filled: dict[str, int] = {}
    for table in tables:
        for name, count in table.filled.items():
            filled[name] = filled.get(name, 0) + count
    return dataclasses.replace(first, values=values, index=index, labels=labels, gaps=gaps, filled=filled,
                               time_gap=None, time_note=None, resampled=None, uneven=None,
                               filled_by=next((table.filled_by for table in tables if table.filled_by), None))
