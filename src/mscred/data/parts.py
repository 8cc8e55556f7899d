"""Training data in several parts: stretches of normal operation that are not one series (a plant's runs between
stops, a historian's exports around an outage). ``MSCRED.fit([part1, part2, ...])`` and ``mscred train A.csv
B.csv`` train on every window of every part and on no window that spans two: a window over the seam of two parts
would join rows that were never adjacent, as the time-gap note says of a gap inside one table.

This module holds what does not need the model: the parts put in one sensor order, the one table that stands for
them (for the notes, the normalisation, the checkpoint record) and the windows' first segments.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from mscred.data.io import Table
from mscred.errors import InputError


def is_parts(X) -> bool:
    """Whether ``X`` is a list (or tuple) of tables -- DataFrames, loaded Tables or 2-D arrays -- rather than one
    table (a list of rows, which scikit-learn's array-likes allow, is one table)."""
    return (isinstance(X, (list, tuple)) and len(X) > 0
            and all(isinstance(p, (pd.DataFrame, Table)) or (isinstance(p, np.ndarray) and p.ndim == 2) for p in X))


def in_order_of(first: Table, table: Table, together: str = "the parts of the training data") -> Table:
    """``table`` with its columns in the order of ``first``'s sensors; other sensors are an InputError naming both
    (``together``: what the two are, for the message). Tables without names of their own (.npy arrays) match by
    position, so only their widths must agree."""
    from mscred.detector import sensor_difference

    if list(table.sensors) == list(first.sensors):
        return table
    if table.positional or first.positional:
        if len(table.sensors) != len(first.sensors):
            raise InputError(f"{table.source}: {len(table.sensors)} sensor column(s), {first.source} has "
                             f"{len(first.sensors)}; {together} must have the same sensors")
        return table
    difference = sensor_difference(first.sensors, table.sensors)
    if difference:
        raise InputError(f"{table.source}: other sensors than {first.source} ({together} must have the same "
                         f"sensors): {difference}")
    return table.in_order(first.sensors)


def describe(parts: Sequence[Table], shown: int = 3) -> str:
    """The parts' sources for a message: "a.csv, b.csv, c.csv" or "a.csv, b.csv, c.csv and 4 more"."""
    names = ", ".join(p.source for p in parts[:shown])
    return names + (f" and {len(parts) - shown} more" if len(parts) > shown else "")


def joined(parts: Sequence[Table]) -> Table:
    """One table of the parts' rows one after the other (the sensors of the first), for what reads the training
    data as a whole: the normalisation, the notes, the checkpoint record. Its index counts the rows from 0 and its
    labels are the parts' (0 where a part has none); its source names the parts."""
    labels = None
    if any(p.labels is not None for p in parts):
        labels = np.concatenate([p.labels if p.labels is not None else np.zeros(len(p.values), dtype=np.int64)
                                 for p in parts])
    gaps = None
    if any(p.gaps is not None for p in parts):
        gaps = np.concatenate([p.gaps if p.gaps is not None else np.zeros(p.values.shape, dtype=bool)
                               for p in parts])
    filled: dict[str, int] = {}
    for part in parts:
        for name, count in part.filled.items():
            filled[name] = filled.get(name, 0) + count
    values = np.concatenate([p.values for p in parts])
    return Table(values=values, sensors=list(parts[0].sensors), index=pd.RangeIndex(len(values)), labels=labels,
                 source=f"the {len(parts)} parts ({describe(parts)})", filled=filled, gaps=gaps,
                 positional=parts[0].positional)


def window_starts(segment_counts: Sequence[int], steps: int) -> np.ndarray:
    """(W,) int64: the first segment of every window of ``steps`` segments within one part, the parts' segments
    laid one after the other (``segment_counts`` of each): no window spans two parts."""
    offsets = np.concatenate([[0], np.cumsum(segment_counts)[:-1]]).astype(np.int64)
    return np.concatenate([offset + np.arange(max(count - steps + 1, 0), dtype=np.int64)
                           for offset, count in zip(offsets, segment_counts)])


def record_signature(signature: dict, parts: Sequence[Table]) -> dict:
    """The settings a checkpoint's data record keeps beside the data (``match_checkpoint_data``): the signature
    settings, and for several parts their row counts (the same rows cut into other parts make other windows)."""
    return {**signature, "parts": [len(part.values) for part in parts]} if len(parts) > 1 else dict(signature)
