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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import LABEL, POSITIONAL, TIME_NAME, TIMESTAMP
from mscred.errors import InputError

@dataclass(frozen=True)
class Reading:
    """``time_column``: the column holding each row's time where it is not named ``timestamp`` (None: that one);
    ``na_values``: text read as a missing value in the sensor columns, compared with the cell's blanks stripped."""

    time_column: Optional[str] = None
    na_values: tuple[str, ...] = ()

    @classmethod
    def of_model(cls, train, time_column: Optional[str] = None, na_values: Sequence[str] = ()) -> "Reading":
        """A model's reading (``train``: its ``TrainConfig``) with a command's options over it: the time column
        given instead of the model's, the missing-value text given besides the model's."""
        return cls(time_column or train.time_column, tuple(dict.fromkeys((*train.na_values, *na_values))))

    def frame(self, df: pd.DataFrame, source: str, time_column_required: bool = True) -> pd.DataFrame:
        """``df`` read so: its time column renamed (``named_time_column``; where not ``time_column_required``, a
        frame without that column is left as it is: a Python caller's frame indexed by its times) and the
        missing-value text made NaN (``missing_text``)."""
        names = {str(c).strip() for c in df.columns}
        if time_column_required or self.time_column in names:
            df = named_time_column(df, self.time_column, source)
        return missing_text(df, self.na_values)


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
        shown = ", ".join(repr(n) for n in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise InputError(f"{source}: no column '{time_column}' (the time column asked for); its columns: {shown}")
    if names.count(time_column) > 1:
        raise InputError(f"{source}: duplicate column name(s): {time_column}")
    if TIMESTAMP in names:
        raise InputError(f"{source}: columns '{time_column}' (the time column asked for) and '{TIMESTAMP}' both; "
                         f"drop or rename '{TIMESTAMP}', or ask for it as the time column")
    out = df.set_axis([TIMESTAMP if n == time_column else c for n, c in zip(names, df.columns)], axis=1)
    out.attrs[TIME_NAME] = time_column
    return out


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
        hit = series.map(lambda v: isinstance(v, str) and v.strip() in wanted).to_numpy(dtype=bool)
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
