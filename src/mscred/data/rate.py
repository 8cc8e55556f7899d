"""Counters given to the model as their rate (``mscred train --rate bytes_total,energy_kwh``; ``train.rate_sensors``).

A counter or a totalizer (Prometheus' ``*_total``, a flow totalizer, an energy meter) only rises: its raw value
leaves the training range as it grows, so every window after training reads as anomalous, while what it says --
how fast it rises -- is steady. The model takes such a sensor's rate instead: its increase since the row before,
per second where the rows have times (so that a missing scrape or an uneven step does not read as a burst), per
row where they have none (row numbers, ids). A counter that falls was reset: it counts again from 0, so its
increase is its new value (Prometheus' ``rate()`` reads a reset so). The first row of a series has no row before:
it takes the rate of the second.

The rate is computed where the model's inputs are made from a table (``MSCRED._inputs``), after missing values
were filled, over the rows scored together: a context's rows and the data's, a monitor's tail and its chunk, so
that the row after a seam takes its increase from the row before it, as in one table (``Table.rated`` marks a
table whose rates were taken already: a monitor rates its tail and chunk as one before scoring the chunk).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from mscred.data.io import Table, check_time_order
from mscred.errors import InputError

def step_seconds(index: pd.Index) -> Optional[np.ndarray]:
    """(T - 1,) float64: the seconds between each row's time and the row before's, the times read as the order check
    reads them (``io.check_time_order``: date-times, durations, date text in its format or zone); None where the
    rows have no times (row numbers, numbers, ids)."""
    if isinstance(index, pd.RangeIndex):
        return None
    times = check_time_order(index, "the rows")   # (checked as they were read: here for their instants)
    if times is None or not times[2]:
        return None
    keys, tick = times[0], times[1]
    # (divided by the ticks a second counts, an exact power of ten: 6e10 ns * 1e-9 is 60.00000000000001)
    return np.diff(keys).astype(np.float64) / (10 ** 9 // tick)


def rates(values: np.ndarray, index: pd.Index, per_second: Optional[bool] = None, source: str = "the table"
          ) -> np.ndarray:
    """Each column of ``values`` (T, k) float64 as its rate over the rows of ``index`` (the module's docstring):
    the increase since the row before (the value itself after a fall: a reset), divided by the seconds between
    the two rows' times, or by 1 where ``index`` holds no times; the first row takes the second's rate (0 when there
    is one row). ``per_second``: how the model's rates were taken at fit (None: as ``index`` allows); a model's
    rates per second of rows without times (an array, a .npy file) are an InputError naming ``source`` -- per row
    they would be another quantity -- and its rates per row stay per row whatever times the rows have."""
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros_like(values)
    seconds = None if per_second is False else step_seconds(index)
    if per_second and seconds is None:
        raise InputError(f"{source}: has no times, and the model's counters (--rate) are rates per second of the "
                         "rows' times: give the rows with their timestamps (a table with its time column)")
    if len(values) < 2:
        return out
    increase = np.diff(values, axis=0)
    reset = increase < 0
    increase[reset] = values[1:][reset]
    if seconds is not None:
        increase /= seconds[:, None]
    out[1:] = increase
    out[0] = increase[0]
    return out


def rated(table: Table, sensors: Sequence[str], per_second: Optional[bool] = None) -> Table:
    """``table`` with the columns of ``sensors`` (those it has and has not rated yet) as their rates
    (``rates``; ``per_second`` as there), marked in ``Table.rated``; ``table`` itself where there are none."""
    todo = [name for name in sensors if name in table.sensors and name not in table.rated]
    if not todo:
        return table
    columns = [table.sensors.index(name) for name in todo]
    values = table.values.copy()
    values[:, columns] = rates(values[:, columns], table.index, per_second, table.source)
    return dataclasses.replace(table, values=values, rated=table.rated + tuple(todo))
