"""The synthetic data of the MSCRED paper (Zhang et al., AAAI 2019, section "Synthetic data").

Each of n sensors is ``sin((t - t0) / omega) + 0.3 * eps`` or the cos form (chosen at random), with t0 ~ U[50, 100],
omega ~ U[40, 50] drawn per sensor and eps ~ N(0, 1) per step. With the defaults (20,000 steps) the training part is
steps 0..7,999 (no anomalies) and the test part steps 10,000..19,999, into which 5 anomalies are injected, each on 3
random root-cause sensors, with durations cycling 10, 30, 90.

The paper injects a "shock wave" into the root-cause sensors. Here a shock is a rectangular pulse added to each root
cause: amplitude U[1.0, 1.5] (the signal's own amplitude is 1 and the noise's standard deviation 0.3) with a random
sign per sensor, so the deviation is clear but of the signal's size. The test part is cut into one equal slot per
anomaly and each anomaly starts at a random step of its slot, away from the slot's edges, so that the anomalies are
spread out and never overlap.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mscred.atomic import atomic_path
from mscred.errors import InputError

if TYPE_CHECKING:  # pandas is imported where a frame is made: `mscred generate --help` reads SHORTEST_LENGTH
    import pandas as pd

__all__ = ["SyntheticData", "generate_synthetic", "write_synthetic", "sensor_names"]

# Parts of the series, as fractions of its length (SPEC: train < 8,000, test 10,000..20,000 of 20,000).
TRAIN_FRACTION = 0.4
TEST_FRACTION = 0.5
NOISE = 0.3
SHOCK_AMPLITUDE = (1.0, 1.5)
# Keep each anomaly this fraction of its slot away from the slot's edges.
SLOT_MARGIN = 0.1


@dataclass
class SyntheticData:
    """The paper's synthetic data.

    Attributes
    ----------
    train : pd.DataFrame, shape (train_steps, 1 + n)
        ``timestamp`` (integer step) and one column per sensor; no anomalies.
    test : pd.DataFrame, shape (test_steps, 2 + n)
        ``timestamp``, the sensors and ``label`` (1 inside an injected anomaly, else 0).
    anomalies : pd.DataFrame, one row per anomaly
        ``start``, ``end`` (steps, end exclusive, same scale as ``timestamp``), ``root_causes`` (``;``-joined sensor
        names) and ``duration`` (= end - start).
    """

    train: pd.DataFrame
    test: pd.DataFrame
    anomalies: pd.DataFrame

    @property
    def sensors(self) -> list[str]:
        return [c for c in self.train.columns if c != "timestamp"]


def sensor_names(n_sensors: int) -> list[str]:
    """``sensor_01 .. sensor_30``: zero-padded so that names sort in sensor order."""
    width = len(str(n_sensors))
    return [f"sensor_{i + 1:0{width}d}" for i in range(n_sensors)]


# How many series-sized float64 arrays generating and writing the data holds at once (the series, its DataFrame,
# the train / test slices, the CSV writer's blocks): our estimate from the code, for the up-front size check.
HELD_COPIES = 4


def too_large(length: int, n_sensors: int, memory: int | None = None) -> str:
    """The message of a size beyond this machine's ``memory`` (bytes, when known); the CLI's flags named, for
    `mscred generate`."""
    here = "" if memory is None else f"; {memory / 2 ** 30:.3g} GiB here"
    return (f"length {length} x {n_sensors} sensors (--length, --sensors): too large for this machine's memory (the "
            f"series is {length * n_sensors * 8 / 2 ** 30:.3g} GiB as float64, held ~{HELD_COPIES} times while "
            f"written{here})")


def check_size(length: int, n_sensors: int) -> None:
    """InputError before any allocation when the data would not fit this machine's memory. Checked up front because
    a system that overcommits grants the arrays and kills the process later (the GPU host: a 2.4 TB request ran
    into the OOM killer instead of a MemoryError)."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):   # the OS does not say: the MemoryError check remains
        return
    if HELD_COPIES * length * n_sensors * 8 > memory:
        raise InputError(too_large(length, n_sensors, memory))


def long_enough(n_anomalies: int, longest: int) -> int:
    """A length from which on every length holds ``n_anomalies`` anomalies of up to ``longest`` steps: slots of
    ``s`` test steps with ``(1 - 2 SLOT_MARGIN) s >= longest + 1`` (the margins round down, so such a slot always
    fits). The message once said "a slot of about 114 test steps" and left the length to work out, beside a
    --help that says x>=1."""
    slot = int(np.ceil((longest + 1) / (1 - 2 * SLOT_MARGIN)))
    return int(np.ceil(n_anomalies * slot / (1 - TEST_FRACTION)))



# The paper's five anomalies of 10, 30, 90, 10 and 30 steps (the defaults of generate_synthetic), and the shortest
# series that `mscred generate` offers for them (its --help said x>=1 while lengths below this one were refused).
ANOMALIES = 5
DURATIONS = (10, 30, 90)
SHORTEST_LENGTH = long_enough(ANOMALIES, max(DURATIONS))

def generate_synthetic(
    n_sensors: int = 30,
    length: int = 20_000,
    seed: int = 0,
    n_anomalies: int = ANOMALIES,
    durations: tuple[int, ...] = DURATIONS,
    n_root_causes: int = 3,
) -> SyntheticData:
    """Generate the paper's synthetic data, deterministically from ``seed``.

    Parameters
    ----------
    n_sensors : int
        Number of sensors n (>= n_root_causes).
    length : int
        Total steps T; train is steps < 0.4 T, test is steps >= 0.5 T.
    seed : int
        Seed of every random draw; the same arguments always give the same data.
    n_anomalies : int
        Anomalies injected into the test part.
    durations : tuple of int
        Anomaly durations, used in turn (10, 30, 90, 10, 30 for 5 anomalies).
    n_root_causes : int
        Sensors disturbed by each anomaly.

    Returns
    -------
    SyntheticData

    Raises
    ------
    InputError
        When the sizes cannot hold the requested anomalies (too few sensors, or a test part too short).
    """
    import pandas as pd

    if n_sensors < max(1, n_root_causes):
        raise InputError(f"synthetic data needs at least {n_root_causes} sensors, got {n_sensors}")
    if n_anomalies < 0 or not durations or min(durations) < 1:
        raise InputError("synthetic data needs n_anomalies >= 0 and positive durations")
    train_end = int(length * TRAIN_FRACTION)
    test_start = int(length * TEST_FRACTION)
    slot = (length - test_start) // max(n_anomalies, 1)
    margin = int(slot * SLOT_MARGIN)
    if n_anomalies and slot - 2 * margin < max(durations) + 1:
        raise InputError(f"length {length} is too short for {n_anomalies} anomalies of up to {max(durations)} steps "
                         f"(--length {long_enough(n_anomalies, max(durations))} or more fits them)")
    if train_end < 1:
        raise InputError(f"length {length} leaves no training steps")
    check_size(length, n_sensors)

    rng = np.random.default_rng(seed)
    names = sensor_names(n_sensors)
    t = np.arange(length, dtype=np.float64)[:, None]  # (T, 1)
    t0 = rng.uniform(50, 100, size=n_sensors)  # (n,)
    omega = rng.uniform(40, 50, size=n_sensors)
    use_cos = rng.integers(0, 2, size=n_sensors).astype(bool)
    phase = (t - t0) / omega  # (T, n)
    series = np.where(use_cos, np.cos(phase), np.sin(phase)) + NOISE * rng.standard_normal((length, n_sensors))

    label = np.zeros(length, dtype=np.int64)
    rows = []
    for k in range(n_anomalies):
        duration = int(durations[k % len(durations)])
        lo = test_start + k * slot + margin
        hi = test_start + (k + 1) * slot - margin - duration  # last allowed start
        start = int(rng.integers(lo, hi + 1))
        causes = np.sort(rng.choice(n_sensors, size=n_root_causes, replace=False))
        amplitude = rng.uniform(*SHOCK_AMPLITUDE, size=n_root_causes) * rng.choice((-1.0, 1.0), size=n_root_causes)
        series[start : start + duration, causes] += amplitude  # rectangular shock on each root cause
        label[start : start + duration] = 1
        rows.append(
            {
                "start": start,
                "end": start + duration,
                "root_causes": ";".join(names[c] for c in causes),
                "duration": duration,
            }
        )

    steps = np.arange(length, dtype=np.int64)
    frame = pd.DataFrame(series, columns=names)
    frame.insert(0, "timestamp", steps)
    train = frame.iloc[:train_end].reset_index(drop=True)
    test = frame.iloc[test_start:].reset_index(drop=True)
    test["label"] = label[test_start:]
    anomalies = pd.DataFrame(rows, columns=["start", "end", "root_causes", "duration"])
    return SyntheticData(train=train, test=test, anomalies=anomalies)


def write_synthetic(
    out_dir: str | os.PathLike, n_sensors: int = 30, length: int = 20_000, seed: int = 0, **kwargs
) -> SyntheticData:
    """Generate the synthetic data and write ``train.csv``, ``test.csv`` and ``anomalies.csv`` into ``out_dir``.

    The three files are written to temporary paths and renamed together at the end, so a failure or an interrupt
    never leaves a half-written file, nor a new train.csv beside an older run's test.csv and ground truth. Values are
    written with 6 decimals (the noise is 0.3, so this loses nothing that matters and keeps test.csv near 3 MB).
    Extra keyword arguments go to :func:`generate_synthetic`.

    Returns
    -------
    SyntheticData
        The data as generated (before rounding to 6 decimals).
    """
    data = generate_synthetic(n_sensors=n_sensors, length=length, seed=seed, **kwargs)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory")
    files = (("train.csv", data.train), ("test.csv", data.test), ("anomalies.csv", data.anomalies))
    for name, _ in files:   # a folder in a file's place would be found at its rename, after the others'
        if (out_dir / name).is_dir():
            raise InputError(f"{out_dir / name}: exists and is a folder; the synthetic data writes a file there")
    with contextlib.ExitStack() as renames:   # each atomic_path renames on exit: all three after the last write
        for name, frame in files:
            frame.to_csv(renames.enter_context(atomic_path(out_dir / name)), index=False, float_format="%.6f")
    return data
