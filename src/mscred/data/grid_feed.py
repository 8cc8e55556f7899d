"""A growing table put on a time grid as it is followed (``watch`` and ``fleet-watch`` of a model trained with
``--resample``): the rows of a period are complete only once a row of a later period arrives, so ``GridFeed`` holds
the rows of the last period seen, as ``LongFeed`` holds the lines of the last time, and gives the periods before
as grid rows (``mscred.data.resample.grid_frame``). The held rows go with the next poll's, so the grid runs on
across polls without a hole; at the final poll (the writers have stopped) the last period is taken as it is.
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

from mscred.data.follow import HeldBack
from mscred.data.io import TIMESTAMP, short_repr
from mscred.data.resample import RESAMPLE, grid_frame, parse_period, row_periods


class GridFeed(HeldBack):
    """``follower``'s rows (a wide table's, or a ``LongFeed``'s wide rows) polled as grid rows of ``period`` (its
    text, the model's ``train.resample``): the interface of a follower that ``watch`` uses (``poll``, ``where``,
    ``notes``, ``path``, ``close``), ``release`` and ``stop_note`` besides."""

    def __init__(self, follower, period: str):
        super().__init__(follower)
        self.period = parse_period(period)
        self._held: Optional[pd.DataFrame] = None   # the rows of the last period seen, not on the grid yet

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The grid rows of the periods shown complete since the last poll (with ``final``, every period read), or
        None when there are none."""
        rows = self.follower.poll(final=final)
        rows = self._joined(rows)
        if rows is None:
            return None
        if final:
            self._held = None
            return self._grid(rows)
        periods = row_periods(rows, self.period, self.where())
        last = periods == periods[-1]
        self._held = rows[last]
        return self._grid(rows[~last]) if not last.all() else None

    def release(self) -> Optional[pd.DataFrame]:
        """The held period's grid row (and the inner follower's held lines'), taken as complete (``watch
        --resume``: the last watch scored it at its final poll); None when none are held."""
        inner = self.follower.release() if isinstance(self.follower, HeldBack) else None
        rows, self._held = self._joined(inner), None
        return None if rows is None else self._grid(rows)

    def stop_note(self) -> Optional[str]:
        """What a watch stopped before a later period came says of the held rows (None when none are held),
        after the inner follower's note of its own held lines."""
        inner = self.follower.stop_note() if isinstance(self.follower, HeldBack) else None
        if self._held is None:
            return inner
        count, start = len(self._held), short_repr(self._held[TIMESTAMP].iloc[0])
        note = (f"note: {self.follower.path}: the last {count} row{'s' if count > 1 else ''} (from {start}) not "
                f"scored: no row of a later {self.period.text} came to show their period complete (watch --resume "
                "goes on from them)")
        return note if inner is None else f"{inner}\n{note}"

    def where(self, skip: int = 0) -> str:
        return self.follower.where(skip)

    def _joined(self, rows: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
        """The held rows, then ``rows`` (the reader's ``attrs`` kept), or whichever there is."""
        if rows is None or not len(rows):
            return self._held
        if self._held is None:
            return rows
        joined = pd.concat([self._held, rows], ignore_index=True)
        joined.attrs.update(rows.attrs)
        return joined

    def _grid(self, rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows.copy(deep=False)
        rows.attrs[RESAMPLE] = self.period.text
        return grid_frame(rows, self.where())
