"""`mscred generate OUT_DIR`: the paper's synthetic data, with its ground truth, as CSV files."""
from __future__ import annotations

from pathlib import Path

import click

from mscred.cli.params import SEED


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

    try:
        data = write_synthetic(out_dir, n_sensors=n_sensors, length=length, seed=seed)
    except MemoryError:   # the sizes asked for, not a fault of the program: bad input (nothing was written)
        need = length * n_sensors * 8 / 2 ** 30
        raise InputError(f"--length {length} x --sensors {n_sensors}: too large for this machine's memory (the "
                         f"series alone is {need:.3g} GiB as float64, held several times while written)") from None
    click.echo(f"wrote {Path(out_dir) / 'train.csv'} ({len(data.train)} rows), test.csv ({len(data.test)} rows, "
               f"{int(data.test['label'].sum())} anomalous), anomalies.csv ({len(data.anomalies)} anomalies)")
