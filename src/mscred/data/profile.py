"""What a table holds, as ``mscred train`` would read it, before any training (``mscred inspect``): its rows and
sensors, its times (span, usual step, how even, the largest jump), its missing values, the sensors that never change
or whose range a few extreme values set, what the model's windows would span in time, and the options that would
read it better. The checks ``train`` makes as notes (``cli/train.py``) are the same functions.
"""
from __future__ import annotations

import dataclasses
import shlex
import warnings
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import Table, check_time_order, duration_text

# A sensor whose range is this many times the range of its middle 98% of rows is scaled (min-max) by a few extreme
# values: a single glitch of 1e30 made one read as constant, silently. A normal sensor's range is a few times that
# span, a heavy-tailed one tens of times; the note is for the cases no real signal explains.
EXTREME_RANGE_RATIO = 1000
# Periods a --resample suggestion rounds the usual step up to (seconds)
_NICE_PERIODS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]


def constant_sensors(table: Table) -> list[str]:
    """The sensors whose present values never change (missing values aside): no signal (the normaliser maps them
    to 0), and any change at detect time is outside what the model saw. None of a table of fewer than two rows."""
    values = np.asarray(table.values)
    if len(values) < 2:
        return []
    with warnings.catch_warnings():   # (a sensor without any value: "All-NaN slice"; it is no constant)
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    return [name for name, a, b in zip(table.sensors, low, high) if a == b]


# At most this many distinct values (two or more) over at least STEP_LIKE_ROWS present values: a state or a step tag
# (a valve's 0/1, a pump's speed stage), which a historian records when it changes and ``--missing hold`` fills
STEP_LIKE_VALUES, STEP_LIKE_ROWS = 5, 20


def step_like_sensors(table: Table) -> list[str]:
    """The sensors whose present values take a few distinct values only (``STEP_LIKE_VALUES``, more than one),
    over at least ``STEP_LIKE_ROWS`` of them: states and step tags, between whose records the last value holds."""
    out = []
    for j, name in enumerate(table.sensors):
        present = table.values[:, j][~np.isnan(table.values[:, j])]
        if len(present) >= STEP_LIKE_ROWS and 1 < len(np.unique(present)) <= STEP_LIKE_VALUES:
            out.append(name)
    return out


# A counter or a totalizer (Prometheus' *_total, a flow totalizer, an energy meter): over at least COUNTER_ROWS present
# values it rises on at least COUNTER_RISING of the steps between them and falls on at most COUNTER_RESETS of them
# (its resets). Its raw value leaves the training range as it grows: every later window reads as anomalous.
COUNTER_ROWS, COUNTER_RISING, COUNTER_RESETS = 20, 0.5, 0.01


def counter_sensors(table: Table) -> list[str]:
    """The sensors that only rise, resets aside (``COUNTER_ROWS``, ``COUNTER_RISING``, ``COUNTER_RESETS``): counters
    and totalizers, whose rate (the differences between rows) is the signal, not their value."""
    out = []
    for j, name in enumerate(table.sensors):
        present = table.values[:, j][~np.isnan(table.values[:, j])]
        if len(present) < COUNTER_ROWS:
            continue
        steps = np.diff(present)
        if (steps > 0).mean() >= COUNTER_RISING and (steps < 0).sum() <= max(1, COUNTER_RESETS * len(steps)):
            out.append(name)
    return out


def extreme_sensors(table: Table) -> list[tuple[str, float, int]]:
    """(sensor, its most extreme value, that value's 0-based row) of each sensor whose min-max range is over
    ``EXTREME_RANGE_RATIO`` times the span of its middle 98% of rows: scaled by it, everything else it reads is ~0 to
    the model. None of a table of fewer than 100 rows (a 1% tail is then no "few values")."""
    values = np.asarray(table.values)
    if len(values) < 100:
        return []
    with warnings.catch_warnings():   # (a sensor without any value: "All-NaN slice"; its figures are NaN, no match)
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanquantile(values, [0.01, 0.99], axis=0)
        full = np.nanmax(values, axis=0) - np.nanmin(values, axis=0)
    out = []
    for j, name in enumerate(table.sensors):
        if high[j] - low[j] > 0 and full[j] > EXTREME_RANGE_RATIO * (high[j] - low[j]):
            column = values[:, j]
            row = int(np.nanargmax(np.abs(column - np.nanmedian(column))))
            out.append((name, float(column[row]), row))
    return out


@dataclasses.dataclass
class TimeProfile:
    """A table's times: first and last (as text), the usual (median) step as text, and in nanoseconds the usual
    step and the 90th percentile step (None for plain numbers): what windows span, what a grid would take."""

    first: str
    last: str
    step: str
    step_ns: Optional[float]
    p90_ns: Optional[float]


def time_profile(table: Table) -> Optional[TimeProfile]:
    """The table's times, or None where it has none (rows numbered) or they are ids, not times."""
    if isinstance(table.index, pd.RangeIndex) or len(table.index) < 2:
        return None
    times = check_time_order(table.index, table.source, repeats=True)
    if times is None:
        return None
    keys, tick, duration = times[0], times[1], times[2]
    step, p90 = (float(v) * tick for v in np.percentile(np.diff(keys.astype(np.float64)), [50, 90]))
    return TimeProfile(_shown(table.index[0]), _shown(table.index[-1]),
                       duration_text(step) if duration else f"{step:g}", step if duration else None,
                       p90 if duration else None)


def _shown(time) -> str:
    """A time as the file gives it (text as it is, a date-time as pandas writes it), cut at 40 characters."""
    text = str(time.item() if isinstance(time, np.generic) else time)
    return text if len(text) <= 40 else text[:37] + "..."


def suggested_period(step_ns: float) -> str:
    """A --resample period to start from: ``step_ns`` (the 90th percentile step, so that a period without a row is
    rare) rounded up to a round duration (1s, 2s, 5s, 10s, 15s, 30s, 1min, ... 1D)."""
    seconds = step_ns / 1e9
    nice = next((p for p in _NICE_PERIODS if p >= seconds), _NICE_PERIODS[-1])
    if nice % 86400 == 0:
        return f"{nice // 86400}D"
    if nice % 3600 == 0:
        return f"{nice // 3600}h"
    if nice % 60 == 0:
        return f"{nice // 60}min"
    return f"{nice}s"


def profile(table: Table, windows: tuple[int, ...], needed: int) -> dict:
    """What ``mscred inspect`` says of ``table`` (read with its missing values kept): JSON types throughout.
    ``windows``: the signature windows (rows) to put in time; ``needed``: the rows one window takes."""
    values = np.asarray(table.values)
    missing = np.isnan(values).sum(axis=0)
    times = time_profile(table)
    out = {
        "source": table.source, "rows": int(len(values)), "sensors": list(table.sensors),
        "label_rows": None if table.labels is None else int(np.asarray(table.labels).sum()),
        "resampled_from": None if table.resampled is None else table.resampled[0],
        "first_time": None if times is None else times.first, "last_time": None if times is None else times.last,
        "usual_step": None if times is None else times.step,
        "uneven_steps": None if table.uneven is None else dict(zip(("p10", "median", "p90"), table.uneven)),
        "largest_jump": None if table.time_gap is None else dict(zip(("row", "step", "usual"), table.time_gap)),
        "missing": {name: int(n) for name, n in zip(table.sensors, missing) if n},
        "empty": [name for name, n in zip(table.sensors, missing) if len(values) and n == len(values)],
        "constant": constant_sensors(table),
        "step_like": step_like_sensors(table),
        "counters": counter_sensors(table),
        "extreme": [{"sensor": s, "value": v, "row": r + 1} for s, v, r in extreme_sensors(table)],
        "window_spans": None if times is None or times.step_ns is None else
        {str(w): duration_text(w * times.step_ns) for w in windows},
        "enough_rows": bool(len(values) >= needed), "rows_needed": needed,
    }
    suggest = []
    if table.uneven is not None and table.resampled is None and times is not None and times.step_ns is not None:
        suggest.append(f"--resample {suggested_period(times.p90_ns)}")
    # (a sensor without any value has nothing to fill from)
    suggest += missing_options(set(out["missing"]) - set(out["empty"]), out["step_like"])
    if out["counters"]:
        suggest.append(shlex.join(["--rate", ",".join(out["counters"])]))
    out["suggested_options"] = suggest
    return out


def missing_options(gappy: set, step_like: Sequence[str]) -> list[str]:
    """The options for the sensors ``gappy`` (with missing values to fill): --missing hold where each is a state or
    a step tag (``step_like``); else --missing interpolate, and --hold of those that are. None without gaps."""
    if not gappy:
        return []
    steps = [name for name in step_like if name in gappy]
    if gappy <= set(steps):
        return ["--missing hold"]
    return ["--missing interpolate"] + ([shlex.join(["--hold", ",".join(steps)])] if steps else [])
