"""Text states read as numbers (``mscred train --states valve=CLOSED,OPEN``; ``train.states``, kept in the model).

A plant historian exports a digital tag as its state's name -- ``OPEN`` / ``CLOSED``, ``ON`` / ``OFF``,
``RUNNING`` / ``STOPPED`` / ``FAULT`` -- and a column of words is no sensor: ``train`` refuses it, ``inspect``
suggests leaving it out. Yet a valve's state is often what explains a flow's change. Given its states in order, the
column is read as each state's position among them (``CLOSED`` 0, ``OPEN`` 1), as it is read, before the missing
values are looked for: an empty cell or an ``--na-value`` text is a missing value as in any column (``--hold`` it), a
text that is none of the states is refused at its cell, naming them. Every command reading the model's data reads
the column so (``Reading.states``: a watched feed's pieces, a long table's values once made wide).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import LABEL, TIMESTAMP, short_repr
from mscred.errors import InputError


def parse_state_spec(text: str, what: str = "--states") -> tuple[str, tuple[str, ...]]:
    """``NAME=STATE,STATE,...`` as (name, states); InputError saying what is wrong (no '=', a name or a state
    empty or with blanks about it, a state given twice), naming ``what`` gave it (the option, or the setting)."""
    name, equals, listed = str(text).partition("=")
    states = tuple(listed.split(","))
    example = "e.g. valve=CLOSED,OPEN"
    if not equals or not name or name.strip() != name:
        raise InputError(f"{what} {text!r}: give a column's name, '=', then its states in order ({example})")
    if not all(state and state.strip() == state for state in states):
        raise InputError(f"{what} {text!r}: a state is empty or has blanks about it ({example})")
    twice = [state for state in dict.fromkeys(states) if states.count(state) > 1]
    if twice:
        raise InputError(f"{what} {text!r}: state {twice[0]!r} given twice")
    if name in (TIMESTAMP, LABEL):
        raise InputError(f"{what} {text!r}: the {'label' if name == LABEL else 'time'} column is read as such")
    return name, states


def state_columns(specs: Sequence[str], what: str = "--states") -> dict[str, tuple[str, ...]]:
    """The columns given states and their states in order, from ``--states`` texts (each checked:
    ``parse_state_spec``); InputError for a column given twice."""
    out: dict[str, tuple[str, ...]] = {}
    for text in specs:
        name, states = parse_state_spec(text, what)
        if name in out:
            raise InputError(f"{what}: column {name!r} given twice")
        out[name] = states
    return out


def _position(cell, count: int) -> Optional[float]:
    """A number that is a state's position (0 .. count - 1) as a float, None for anything else."""
    if isinstance(cell, (bool, np.bool_)) or not isinstance(cell, (int, float, np.integer, np.floating)):
        return None
    return float(cell) if float(cell).is_integer() and 0 <= cell < count else None


def coded_states(df: pd.DataFrame, specs: Sequence[str], source: str) -> pd.DataFrame:
    """``df`` with each column named in ``specs`` (``NAME=STATE,...``; names compared stripped, as read) read as
    its states' positions (float64), missing values kept missing, a number that is a position already kept (a
    frame read twice reads the same); InputError at the first cell that holds none of them. ``df`` itself where no
    such column is in it (a command reading a table without it refuses the missing sensor elsewhere, naming it)."""
    columns = state_columns(specs)
    names = [str(c).strip() for c in df.columns]
    out = df
    for position, name in enumerate(names):
        if name not in columns:
            continue
        states = columns[name]
        series = df.iloc[:, position]
        if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
            series = series.astype(object)   # (numbers: the codes already, checked below)
        present = series.notna().to_numpy()
        cells = series[present]
        # A cell read once already (a monitor's tail read again with its next chunk; a Python caller's codes) is a
        # number: kept where it is a state's position, so that reading twice reads the same
        given = {state: float(k) for k, state in enumerate(states)}
        if pd.api.types.infer_dtype(cells, skipna=True) in ("string", "empty"):   # (a column of text: vectorised)
            found = pd.Index(list(states)).get_indexer(cells.astype(str).str.strip())   # (-1: none of them)
            codes = pd.Series(np.where(found >= 0, found, np.nan), index=cells.index, dtype=np.float64)
        else:
            codes = pd.Series([given.get(cell.strip()) if isinstance(cell, str) else _position(cell, len(states))
                               for cell in cells], index=cells.index, dtype=np.float64)
        unknown = np.flatnonzero(codes.isna().to_numpy())
        if len(unknown):
            r = int(np.flatnonzero(present)[unknown[0]])
            when = f" ({TIMESTAMP} {short_repr(df[TIMESTAMP].iloc[r])})" if TIMESTAMP in names else ""
            raise InputError(f"{source}: column {name!r} row {r + 1}{when}: {short_repr(series.iloc[r])} is none of "
                             f"its states ({', '.join(states)}: --states {name}={','.join(states)})")
        values = np.full(len(series), np.nan)
        values[present] = codes.to_numpy(dtype=np.float64)
        if out is df:
            out = df.copy()
        out.isetitem(position, values)
    return out


# The most states a column of words may have for ``inspect`` to suggest reading it as states (more: an id, a comment)
MAX_STATES = 8


def suggested_states(column: pd.Series, na_values: Sequence[str] = ()) -> tuple[str, ...]:
    """The distinct texts of a column of words, sorted, where they are 2 to ``MAX_STATES`` (a state's names:
    ``inspect`` suggests ``--states NAME=...`` of them); () otherwise. Empty cells and ``na_values`` are no state."""
    texts = column.dropna().astype(str).str.strip()
    distinct = sorted(set(texts) - set(na_values) - {""})
    if not 2 <= len(distinct) <= MAX_STATES or any("," in text for text in distinct):
        return ()
    return tuple(distinct)
