"""`mscred fleet SOURCE --out DIR [--nproc N]`: one model per entity (SMD machines, a folder of tables), one summary.

Also runs under torchrun: ``torchrun --nproc-per-node N -m mscred.distributed fleet SOURCE --out DIR``.
"""
from __future__ import annotations

import click

from mscred.cli.params import COUNT, NamedPath, encoding_option

from mscred.cli.settings import with_settings
from mscred.cli.train import given_overrides, training_options

# table columns shown on the terminal (summary.csv has them all)
SHOWN = ["entity", "rank", "status", "windows", "epochs", "val_loss", "threshold", "seconds", "f1", "events", "auc_pr"]


@click.command()
@click.argument("source", type=NamedPath(hint="give a dataset name or a folder"))
@click.option("--out", "out", required=True, type=NamedPath(file_okay=False),
              help="Output folder: models/<entity>/ (the name as a file name: the summary's model column), "
                   "rows/, summary.csv, summary.md.")
@click.option("--data-root", type=NamedPath(exists=True, file_okay=False), default=None,
              help="The dataset's folder when SOURCE is a dataset name (smd, smd:m1,m2, smap, msl).")
@click.option("--nproc", type=COUNT, default=1, show_default=True,
              help="Processes; each trains its share of the entities (one GPU each on CUDA).")
@training_options
@click.option("--resume", is_flag=True,
              help="Skip entities already trained on the same data with the same settings (row 'ok' and model "
                   "present); the others are trained again.")
@click.option("--quiet", is_flag=True, help="No line per finished entity.")
@encoding_option
def fleet(source, out, data_root, nproc, settings, resume, quiet, encoding, **training) -> None:
    """Train one MSCRED model per entity of SOURCE (a dataset name or a folder) and summarise them.

    \b
    SOURCE is one of:
      smd, smd:m1,m2, smap, msl  the dataset in --data-root (each machine or channel an entity)
      a folder of sub-folders    each a train.* + test.* pair with a 'label' column (as `mscred generate`
                                 writes): trained on train, evaluated on test
      a folder of tables         each CSV/Parquet/.npy file an entity of normal data; a file with a 'label'
                                 column trains on its first half and is evaluated on the second; a
                                 sub-folder of tables without a train/test pair is one entity trained on
                                 them as parts (in name order; as train's several DATA files)
    (hidden files and folders, named '.*', are not entities). --out is a new folder, or one a fleet wrote.
    --encoding is that of the folder's CSV tables (and anomalies.csv); smd, smap and msl ignore it.
    """
    from mscred.errors import InputError, PartlyDone
    from mscred.fleet import BAD_INPUT, run_fleet

    overrides = given_overrides()   # (``training``: training_options' values, read there by name)
    overrides = with_settings(overrides, settings)
    echo = None if quiet else (lambda line: click.echo(line, err=True))
    summary = run_fleet(source, out, overrides, root=data_root, nproc=nproc, resume=resume, echo=echo,
                        encoding=encoding)
    if summary is None:  # ranks > 0 under torchrun
        return
    _print(summary)
    failed = int((summary["status"] != "ok").sum())
    click.echo(f"{len(summary) - failed} of {len(summary)} entities trained; wrote {out}/summary.csv")
    if failed and summary["status"].str.startswith(BAD_INPUT).all():
        # Nothing trained and every reason was the data: bad input, as for one table (exit 2); the summary stays.
        first = summary.iloc[0]
        raise InputError(f"no entity trained, every one on bad input (the summary: {out}/summary.csv); "
                         f"{first['entity']}: {first['status'][len(BAD_INPUT):]}")
    if failed:  # some trained: the summary says which failed and why
        raise PartlyDone(f"{failed} of {len(summary)} entities failed")


def _print(summary) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="fleet summary")
    for column in SHOWN:
        table.add_column(column, justify="left" if column in ("entity", "status") else "right")
    for row in summary.to_dict("records"):
        row["events"] = (f"{int(row['events_found'])}/{int(row['events_total'])}"
                         if _given(row.get("events_total")) else None)
        table.add_row(*[_cell(row.get(column)) for column in SHOWN])
    console = Console()
    if not console.is_terminal:  # piped or logged: rich would squeeze the table into 80 columns
        console = Console(width=160)
    console.print(table)


def _given(value) -> bool:
    import pandas as pd

    return value is not None and not pd.isna(value)  # None, NaN, and pd.NA (the summary's integer columns)


def _cell(value) -> str:
    if not _given(value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if not value.is_integer() or abs(value) < 1e4 else f"{value:.0f}"
    return str(value)
