"""`mscred generate OUT_DIR`: the paper's synthetic data, with its ground truth, as CSV files."""
from __future__ import annotations

from pathlib import Path

import click

from mscred.cli.params import NamedPath, SEED
from mscred.data.synthetic import SHORTEST_LENGTH


@click.command()
@click.argument("out_dir", type=NamedPath(file_okay=False))
@click.option("--sensors", "n_sensors", type=click.IntRange(min=4), default=30, show_default=True,
              help="Number of sensors n.")
@click.option("--length", type=click.IntRange(min=SHORTEST_LENGTH), default=20_000, show_default=True,
              help="Total steps; train is the first 40%, test the last 50%.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of every random draw.")
def generate(out_dir: str, n_sensors: int, length: int, seed: int) -> None:
    """Write OUT_DIR/train.csv, test.csv (with a label column) and anomalies.csv (start, end, root causes)."""
    from mscred.data.synthetic import too_large, write_synthetic
    from mscred.errors import InputError

    try:   # (a size beyond this machine's memory is refused inside, before any allocation)
        data = write_synthetic(out_dir, n_sensors=n_sensors, length=length, seed=seed)
    except MemoryError:   # under the machine's memory, but more than is free now; nothing was written
        raise InputError(too_large(length, n_sensors)) from None
    click.echo(f"wrote {Path(out_dir) / 'train.csv'} ({len(data.train)} rows), test.csv ({len(data.test)} rows, "
               f"{int(data.test['label'].sum())} anomalous), anomalies.csv ({len(data.anomalies)} anomalies)")
