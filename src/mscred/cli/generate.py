"""`mscred generate OUT_DIR`: the paper's synthetic data, with its ground truth, as CSV files."""
from __future__ import annotations

import os
from pathlib import Path

import click

from mscred.cli.params import SEED


# How many series-sized float64 arrays write_synthetic holds at once (the series, its DataFrame, the train / test
# slices, the CSV writer's blocks): our estimate from the code, for the up-front size check.
HELD_COPIES = 4


def _physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the OS does not say (the MemoryError check remains)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


@click.command()
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--sensors", "n_sensors", type=click.IntRange(min=4), default=30, show_default=True,
              help="Number of sensors n.")
@click.option("--length", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="Total steps; train is the first 40%, test the last 50%.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of every random draw.")
def generate(out_dir: str, n_sensors: int, length: int, seed: int) -> None:
    """Write OUT_DIR/train.csv, test.csv (with a label column) and anomalies.csv (start, end, root causes)."""
    from mscred.data.synthetic import write_synthetic
    from mscred.errors import InputError

    # The sizes asked for, not a fault of the program: bad input, refused before any allocation. Checked against
    # the machine's memory up front because a system that overcommits grants the arrays and kills the process
    # later (seen on the GPU host: a 2.4 TB request ran until the kernel's OOM killer stopped it).
    need = HELD_COPIES * length * n_sensors * 8
    memory = _physical_memory()
    too_large = (f"--length {length} x --sensors {n_sensors}: too large for this machine's memory (the series is "
                 f"{length * n_sensors * 8 / 2 ** 30:.3g} GiB as float64, held ~{HELD_COPIES} times while written")
    if memory is not None and need > memory:
        raise InputError(f"{too_large}; {memory / 2 ** 30:.3g} GiB here)")
    try:
        data = write_synthetic(out_dir, n_sensors=n_sensors, length=length, seed=seed)
    except MemoryError:   # (under the machine's memory, but more than is free now; nothing was written)
        raise InputError(f"{too_large})") from None
    click.echo(f"wrote {Path(out_dir) / 'train.csv'} ({len(data.train)} rows), test.csv ({len(data.test)} rows, "
               f"{int(data.test['label'].sum())} anomalous), anomalies.csv ({len(data.anomalies)} anomalies)")
