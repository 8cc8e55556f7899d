"""`python -m mscred.distributed train DATA --out MODEL [--nproc N]`: `mscred train` with DDP, also under torchrun.

The options are those of `mscred train` (taken from its click command, so the two never drift apart) plus
``--nproc``. ``--batch-size`` is the GLOBAL batch: each of the N ranks trains on its 1/N share of every batch.
"""
from __future__ import annotations

from pathlib import Path

import click

from mscred.cli.params import COUNT
from mscred.cli.settings import with_settings
from mscred.cli.train import TRAINING_SETTINGS, checkpoint_dir_for, training_overrides
from mscred.cli.train import train as _train

NPROC = click.Option(["--nproc"], type=COUNT, default=1, show_default=True,
                     help="Processes to train with (DistributedDataParallel; one GPU each on CUDA). Under torchrun, "
                          "torchrun's --nproc-per-node decides instead.")


def _run(data, out, resume, theta, quiet, nproc, encoding=None, settings=(), **options) -> None:
    from mscred.distributed import summary_line, train_distributed

    options = {k: v for k, v in options.items() if v is not None and v != ()}   # (given; a repeatable one: once)
    unknown = sorted(k for k in options if k not in TRAINING_SETTINGS)
    if unknown:
        raise click.UsageError(f"option(s) {', '.join(unknown)} not supported with DDP training yet")
    overrides = training_overrides(theta, **options)
    overrides["progress"] = not quiet  # the CLI shows the epochs; the Python API is quiet unless asked
    overrides = with_settings(overrides, settings)
    out = Path(out)
    summary = train_distributed(data, out, overrides, nproc=nproc, checkpoint_dir=checkpoint_dir_for(out),
                                resume=resume, encoding=encoding)
    if summary is not None:  # None on ranks > 0 under torchrun
        click.echo(summary_line(summary))


# Once `mscred train` has its own --nproc (cli/train.py calling train_distributed), that one is used.
_PARAMS = [*_train.params] + ([] if any(p.name == "nproc" for p in _train.params) else [NPROC])
train_ddp = click.Command("train", callback=_run, params=_PARAMS,
                          help="Train MSCRED on DATA with DistributedDataParallel and write MODEL_DIR (rank 0).")
