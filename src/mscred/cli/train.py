"""`mscred train DATA --out MODEL_DIR`: fit MSCRED on normal data and save the model directory."""
from __future__ import annotations

import dataclasses
import math
import shutil
import time
import warnings
from pathlib import Path

import click

from mscred.cli.params import (COLUMN_NAME, COLUMN_NAMES, COUNT, LONG_COLUMNS, MISSING_TEXT, PERIOD, SEED, STATES,
                               TIME_ZONE, NamedPath, column_names, encoding_option)
from mscred.cli.settings import SET_OPTION, with_settings
from mscred.config import MISSING_POLICIES, TrainConfig
from mscred.detect import SCORE_METHODS
from mscred.ops import AUTO, CONV_BACKENDS, MODEL_BACKENDS


def parse_theta(value: str) -> float | None:
    """``auto`` (theta from the validation residuals) or a positive float (the paper's 0.005)."""
    if value.strip().lower() == "auto":
        return None
    try:
        theta = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither 'auto' nor a number", param_hint="--theta") from None
    if not (theta > 0 and math.isfinite(theta)):
        raise click.BadParameter(f"{value!r} must be a finite number > 0", param_hint="--theta")
    return theta


# The repeatable options naming sensors, each a comma-separated group: (setting, option)
NAME_LISTS = (("only_sensors", "--sensors"), ("drop_columns", "--drop-columns"), ("hold_sensors", "--hold"),
              ("rate_sensors", "--rate"))


# The options of ``training_options`` that are estimator settings of the same name (--theta apart: a score's)
TRAINING_SETTINGS = ("epochs", "batch_size", "micro_batch", "device", "seed", "backend", "conv_backend", "bf16",
                     "cuda_graphs", "method", "threshold", "missing", "time_column", "time_zone", "na_values",
                     "long_columns", "resample", "only_sensors", "drop_columns", "hold_sensors", "rate_sensors",
                     "states")


def given_overrides() -> dict:
    """``training_overrides`` of the running command's ``training_options`` (train, fleet)."""
    params = click.get_current_context().params
    return training_overrides(params.get("theta"), **{k: v for k, v in params.items() if k in TRAINING_SETTINGS})


def training_overrides(theta: str | None = None, method: str | None = None, **options) -> dict:
    """The estimator's settings from ``training_options``' values, those given (not None, not an empty repeat):
    the repeated texts as one tuple, the name lists as one tuple of names (``column_names``), --theta and --score
    as ``score_overrides`` reads them. Shared by train, fleet and DDP train, which take the same options."""
    overrides = {k: v for k, v in options.items() if v is not None and v != ()}
    for name in ("na_values", "states"):   # (repeated texts: one tuple)
        if name in overrides:
            overrides[name] = tuple(overrides[name])
    for name, option in NAME_LISTS:
        if name in overrides:
            overrides[name] = column_names(overrides[name], option)
    overrides.update(score_overrides(theta, method))  # --theta alone means the paper's count score
    return overrides


def score_overrides(theta: str | None, method: str | None) -> dict:
    """Settings of --theta/--score: a theta alone selects the paper's count score, which is the one it acts on;
    beside another --score it would be dropped without a word, so it is refused."""
    out = {}
    if theta is not None and method not in (None, "count"):
        raise click.BadParameter(f"is read by --score count only; --score is '{method}'", param_hint="--theta")
    if theta is not None:
        out["theta"] = parse_theta(theta)
        out["method"] = "count"
    if method is not None:
        out["method"] = method
    return out


def _made_by(period: str) -> str:
    """How a ``--resample`` period's rows make its value, in words: "mean", "last", ..."""
    from mscred.data.resample import parse_period

    return parse_period(period).how


def report_filled(table) -> None:
    """One ``note:`` line on stderr naming what ``missing="interpolate"`` (or ``"hold"``) filled (nothing when nothing
    was missing), as the other notes about the data; before it, one saying how many rows a resampled table was read from
    (``Table.resampled``)."""
    resampled = table.resampled
    if resampled is not None:
        click.echo(f"note: {table.source}: {resampled[0]:,} rows resampled to {len(table.values):,} rows of "
                   f"{resampled[1]} (--resample: each the {_made_by(resampled[1])} of its period's rows)", err=True)
    if table.filled:
        counts = sorted(table.filled.items(), key=lambda kv: -kv[1])
        said = []
        for holding, how in ((False, "interpolated"), (True, "held the last value for")):   # (--hold's sensors apart)
            these = [(name, n) for name, n in counts if table.fills_by_holding(name) == holding]
            if these:
                shown = ", ".join(f"{name} {n}" for name, n in these[:5]) + (", ..." if len(these) > 5 else "")
                said.append(f"{how} {sum(n for _, n in these)} missing value(s) in {len(these)} sensor(s): {shown}")
        click.echo(f"note: {table.source}: {'; '.join(said)}", err=True)


def report_time_gap(table, training: bool = False) -> None:
    """One ``note:`` line on stderr where one time step is more than 10 usual ones (``Table.time_gap``: a stop of
    the plant, a historian outage): the windows count rows, not time, so a window over the gap joins its two sides
    as if they were adjacent, at train as at detect. Before it, one where date text such as 01/02/2024 read
    increasing both day and month first (``Table.time_note``: which way it was read). ``training``: the note says
    how to keep the training windows off the gap (the table split there, given as parts), and one more where the
    steps vary widely (``Table.uneven``) names ``--resample``, which the model would keep."""
    note = getattr(table, "time_note", None)
    if note:
        click.echo(f"note: {note}", err=True)
    uneven = table.uneven
    if training and uneven is not None and table.resampled is None:
        click.echo(f"note: {table.source}: the rows are not evenly spaced in time (a tenth of the steps under "
                   f"{uneven[0]}, a tenth over {uneven[2]}; the median {uneven[1]}): the windows count rows, so they "
                   "span times that vary as much; --resample PERIOD puts the rows on a regular grid", err=True)
    gap = table.time_gap
    if gap is not None:
        split = (f"; to train on no window over it, split the table before row {gap[0]} and give both parts as DATA"
                 if training else "")
        click.echo(f"note: {table.source}: the time jumps by {gap[1]} at row {gap[0]} (the usual step is {gap[2]}); "
                   f"windows count rows, not time, so the windows over a gap join the rows on both sides{split}",
                   err=True)


def report_constant(table) -> None:
    """One line on stderr naming the sensors that never change in the training data: they carry no signal (the
    normaliser maps them to 0), and any change in them at detect time is outside what the model saw."""
    from mscred.data.profile import constant_sensors

    constant = constant_sensors(table)
    if constant:
        shown = ", ".join(constant[:5]) + (", ..." if len(constant) > 5 else "")
        click.echo(f"note: {len(constant)} sensor(s) of {table.source} never change in the training data ({shown}): "
                   "they carry no signal, and any change in them at detect time is outside what the model saw",
                   err=True)


def report_counters(table, rated: tuple[str, ...] = ()) -> None:
    """One line on stderr naming the sensors that only rise, resets aside (``data.profile.counter_sensors``), other
    than those given as rates (``rated``, --rate): a counter's raw value leaves the training range as it grows, so
    every later window of it reads as anomalous."""
    import shlex

    from mscred.data.profile import counter_sensors

    counters = [name for name in counter_sensors(table) if name not in rated]
    if counters:
        shown = ", ".join(counters[:5]) + (", ..." if len(counters) > 5 else "")
        click.echo(f"note: {len(counters)} sensor(s) of {table.source} only rise, resets aside ({shown}): counters "
                   "or totalizers? their values leave the training range as they grow, so later windows read as "
                   f"anomalous; give the model their rate: {shlex.join(['--rate', ','.join(rated + tuple(counters))])}",
                   err=True)


def report_extreme_range(table) -> None:
    """One line on stderr naming the sensors whose min-max range is set by a few extreme values (see
    ``data.profile.EXTREME_RANGE_RATIO``): scaled by it, everything else they read is ~0 to the model."""
    from mscred.data.profile import EXTREME_RANGE_RATIO, extreme_sensors

    extreme = extreme_sensors(table)
    if extreme:
        name, value, row = extreme[0]
        others = f" (and {len(extreme) - 1} more)" if len(extreme) > 1 else ""
        click.echo(f"note: sensor '{name}'{others} of {table.source}: a few extreme values (e.g. {value:.4g} at "
                   f"row {row + 1}) set its training range, over {EXTREME_RANGE_RATIO}x the span of its other rows, "
                   "so scaled by it the sensor reads as constant to the model: a glitch? clean it, or drop the sensor",
                   err=True)


def checkpoint_dir_for(out: Path) -> Path:
    """Per-epoch checkpoints live beside the model directory, which is written only once, atomically, at the end."""
    return out.with_name(out.name + ".checkpoints")


# The model and scoring settings every training command takes (train, fleet, DDP train): one definition.
_TRAINING_OPTIONS = [
    click.option("--epochs", type=COUNT, default=None, help="Training epochs [config: 10]."),
    click.option("--batch-size", type=COUNT, default=None, help="Windows per batch [config: 32]."),
    click.option("--micro-batch", type=COUNT, default=None,
                 help="Windows per forward and backward pass: each batch in micro-batches whose gradients add up to "
                      "the batch's, the same training in less memory, eagerly [config: the whole batch; on a CPU "
                      "where it would not fit, the largest micro-batch that does, with a note]."),
    click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None, help="[config: auto]"),
    click.option("--seed", type=SEED, default=None, help="Seed of weights and batch order [config: 0]."),
    click.option("--backend", type=click.Choice((AUTO, *MODEL_BACKENDS)), default=None,
                 help="ConvLSTM/attention ops [config: auto = fused on a CUDA device, else reference]."),
    click.option("--conv-backend", type=click.Choice(CONV_BACKENDS), default=None,
                 help="Encoder convolutions [config: torch]."),
    click.option("--bf16", is_flag=True, default=None,
                 help="bf16 autocast: on CUDA, and on CPUs with native bf16 (AVX512-BF16, AMX), else ignored."),
    click.option("--cuda-graphs/--no-cuda-graphs", default=None,
                 help="Capture whole steps (and scoring batches) in CUDA graphs [config: training steps on a CUDA "
                      "device]."),
    click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
                 help="Missing (NaN) sensor values in the data: 'error' (exit 2 naming the cell), 'interpolate' "
                      "(linearly between the neighbouring rows) or 'hold' (the sensor's last value before: a step "
                      "tag, a historian's exception-reported one); the counts are reported; kept in the model for "
                      "detect [config: error]."),
    click.option("--hold", "hold_sensors", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
                 help="Sensors whose missing values hold their last value before (states, step tags), whatever "
                      "--missing says of the others: a table of float and step tags takes --missing interpolate "
                      "--hold valve1,pump2; kept in the model for detect [config: none]."),
    click.option("--rate", "rate_sensors", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
                 help="Counters and totalizers the model takes as their rate (the increase since the row before, per "
                      "second where the rows have times; a fall read as a reset): --rate bytes_total,energy_kwh; "
                      "kept in the model for detect [config: none]."),
    click.option("--states", "states", type=STATES, multiple=True, metavar="NAME=STATE,...",
                 help="A column of text states read as each state's position among them (repeatable): --states "
                      "valve=CLOSED,OPEN reads CLOSED as 0 and OPEN as 1; another text is refused at its cell; kept "
                      "in the model for detect [config: none]."),
    click.option("--time-column", "time_column", type=COLUMN_NAME, default=None, metavar="NAME",
                 help="The data's column holding each row's time, where it is not named 'timestamp' (e.g. 'Time'); "
                      "kept in the model: detect, watch and calibrate read the same name [config: timestamp]."),
    click.option("--na-value", "na_values", type=MISSING_TEXT, multiple=True, metavar="TEXT",
                 help="Text that stands for a missing sensor value in the data (a historian's 'Bad', 'I/O Timeout'; "
                      "repeat for several), read as missing besides empty cells: --missing decides what it gets; "
                      "kept in the model for detect [config: none]."),
    click.option("--time-zone", "time_zone", type=TIME_ZONE, default=None, metavar="ZONE",
                 help="The IANA time zone of the data's local times written without a UTC offset (e.g. "
                      "Europe/Berlin, America/Chicago): read as the instants they name, the hour the clocks go back "
                      "(which comes twice) told apart by order; kept in the model for detect [config: times as they "
                      "are]."),
    click.option("--long", "long_columns", type=LONG_COLUMNS, default=None, metavar="SENSOR,VALUE",
                 help="The data is a long table, one value a row (a historian's or Prometheus' export): SENSOR names "
                      "each row's sensor, VALUE holds its value; made wide as it is read (a row per time, a column "
                      "per sensor), kept in the model for detect [config: a wide table]."),
    click.option("--resample", "resample", type=PERIOD, default=None, metavar="PERIOD[,HOW]",
                 help="Put the rows on a regular time grid as they are read: each row the mean of a PERIOD's rows "
                      "(a duration such as 10s, 1min, 1h; a number for times that are numbers; ',last' after it "
                      "takes the last value instead, ',first', ',max' and ',min' likewise), a period without a "
                      "value of a sensor a missing value (--missing decides); for unevenly spaced data (a "
                      "historian's changes-only records, a long table's times); kept in the model: detect, watch "
                      "and calibrate read on the same grid [config: the rows as they are]."),
    click.option("--sensors", "only_sensors", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
                 help="Read only these sensors (columns of a wide table, names in a long table's SENSOR column; "
                      "comma-separated or repeated), the others left out as the data is read; kept in the model: "
                      "detect, watch and calibrate read the same ones from tables holding more [config: every "
                      "sensor]."),
    click.option("--drop-columns", "drop_columns", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
                 help="Columns of the data that are not sensors (a status text, a unit, a comment, a batch ID), left "
                      "out wherever present as it is read; kept in the model for detect [config: none]."),
    click.option("--theta", type=str, default=None,
                 help="Residual threshold of the count score: a number (the paper: 0.005) or 'auto' (a quantile of "
                      "the validation residuals); implies --score count unless --score says otherwise."),
    click.option("--score", "method", type=click.Choice(SCORE_METHODS), default=None,
                 help="Window score: z_sensor (default: standardised per-sensor residuals), count (the paper's "
                      "entries above theta) or mse."),
    click.option("--threshold", type=click.Choice(["beta_max", "percentile", "pot"]), default=None,
                 help="Anomaly threshold rule on the validation scores [config: beta_max]."),
    SET_OPTION,
]


def training_options(command):
    """Add the shared training options to a click command (they arrive as keyword arguments)."""
    for option in reversed(_TRAINING_OPTIONS):
        command = option(command)
    return command




def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` (itself included) that does not exist yet, or None when it exists."""
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


def check_checkpoint_dir(ckpt: Path) -> None:
    """Before training: the checkpoints' folder, which a finished run removes as a whole, must hold nothing but
    mscred's checkpoint, its data record and temporary files of their writes (a folder of the user's files there
    was deleted without a word at the end)."""
    from mscred.atomic import few_names
    from mscred.errors import InputError
    from mscred.train_checkpoint import CHECKPOINT_NAME, DATA_RECORD_NAME

    if not ckpt.is_dir() or ckpt.is_symlink():
        return   # (missing: created; a file: refused, naming it, where the record is written)
    foreign = sorted(entry.name for entry in ckpt.iterdir() if entry.name not in (CHECKPOINT_NAME, DATA_RECORD_NAME)
                     and not (entry.name.startswith(".") and entry.name.endswith(".tmp")))
    if foreign:
        raise InputError(f"{ckpt}: the checkpoints' folder holds files that are not mscred's checkpoints "
                         f"({few_names(foreign)}); "
                         "a finished run removes the folder: move them, or give --out another name")


def check_val_scores_place(path: Path, out: Path) -> None:
    """Before training: --val-scores must be writable where it is, outside the model folder and its checkpoints'.
    Under a file it failed only after training, with the model written and exit 2; inside the model folder it made
    the next `train --out` there refuse the folder (a file not of a model), and inside the checkpoints' folder the
    next run's clean-up deleted it."""
    from mscred.atomic import check_folders_above
    from mscred.errors import InputError

    check_folders_above(path)
    target = path.resolve()
    for folder, what in ((out, "the model folder (--out)"), (checkpoint_dir_for(out), "the checkpoints' folder")):
        where = folder.resolve()
        if target == where or where in target.parents:
            raise InputError(f"{path}: inside {what} {folder}, which mscred replaces or removes as a whole; write the "
                             "validation scores elsewhere")


def _write_validation_scores(model, parts, path) -> None:
    """The validation rows' scores as a SCORES file (timestamp or row, score, is_anomaly), as `detect` writes; for
    training data in parts, a first column ``part`` (1-based) and each row's timestamp (or row number) in its part."""
    import numpy as np
    import pandas as pd

    from mscred.atomic import atomic_path
    from mscred.data.io import write_table
    from mscred.detector import index_column

    rows = model.validation_rows_
    timed = all(index_column(part) == "timestamp" for part in parts)
    # each row's timestamp, else its row number in its own part (as detect numbers a file's rows)
    index = (parts[0].index.append([part.index for part in parts[1:]]) if timed
             else np.concatenate([np.arange(len(part.values)) for part in parts]))
    columns = {"timestamp" if timed else "row": np.asarray(index)[rows]}
    if len(parts) > 1:
        part_of_row = np.repeat(np.arange(1, len(parts) + 1), [len(part.values) for part in parts])
        columns = {"part": part_of_row[rows], **columns}
    frame = pd.DataFrame({**columns, "score": model.decision_scores_[rows], "is_anomaly": model.labels_[rows]})
    with atomic_path(path) as tmp:
        write_table(frame, tmp)
    click.echo(f"wrote the scores of {int(rows.sum())} validation rows to {path}", err=True)


@click.command()
@click.argument("data", type=NamedPath(), nargs=-1, required=True)
@click.option("--out", "out", required=True, type=NamedPath(file_okay=False, hint="give the model a folder name"),
              help="Model directory to write.")
@click.option("--resume", is_flag=True, help="Continue from the checkpoint of an interrupted run.")
@training_options
@click.option("--quiet", is_flag=True,
              help="No progress bar, and no note of a setting this machine ignores (--bf16, --cuda-graphs).")
@click.option("--nproc", type=COUNT, default=1, show_default=True,
              help="Processes for DistributedDataParallel training, one GPU each on CUDA; --batch-size is then the "
                   "global batch. Under torchrun, torchrun's --nproc-per-node decides.")
@click.option("--val-scores", "val_scores", type=NamedPath(dir_okay=False), default=None,
              help="Also write the scores of the validation rows (the last windows of DATA, which set the "
                   "threshold) as a SCORES file, for `evaluate --threshold ... --val-scores`.")
@encoding_option
def train(data, out, resume, settings, quiet, nproc, val_scores, encoding, **training) -> None:
    """Train MSCRED on DATA (CSV, Parquet or .npy of normal behaviour) and write MODEL_DIR.

    Several DATA files are parts of the training data that are not one series (runs between plant stops): every
    window of every part is trained on, and none spans two parts; the last windows (of the last parts) validate.
    A folder as DATA gives its tables as parts, in name order (a logger's rolled files, as `mscred fleet` takes an
    entity's folder).
    """
    from mscred.data.io import check_writable_table, load_table
    from mscred.data.parts import in_order_of, joined, record_signature
    from mscred.data.reading import settings_reading
    from mscred.detector import MSCRED, check_rate_sensors, check_sensor_count
    from mscred.errors import IgnoredSettingWarning, InputError, note_lines
    from mscred.fleet import tables_given

    folders = [Path(path).resolve() for path in data if Path(path).is_dir()]
    data = [part for path in data for part in tables_given(path, "to train on")]   # (a folder: its tables)
    overrides = given_overrides()   # (``training``: training_options' values, read there by name)
    overrides["progress"] = not quiet  # the CLI shows the epochs; the Python API is quiet unless asked
    overrides = with_settings(overrides, settings)
    from mscred.atomic import check_replaceable_dir
    from mscred.detector import MODEL_FILES
    from mscred.launch import under_torchrun
    from mscred.train_checkpoint import CHECKPOINT_NAME, match_checkpoint_data

    # A folder of other files (the data itself, notes) is refused before training, not replaced after it.
    check_replaceable_dir(out, MODEL_FILES, "an mscred model")
    check_checkpoint_dir(checkpoint_dir_for(Path(out)))   # (which a finished run removes)
    if val_scores is not None:
        if nproc > 1 or under_torchrun():
            raise InputError("--val-scores: not with --nproc or torchrun (score the validation rows with `mscred "
                             "detect` instead)")
        check_writable_table(val_scores, inputs=list(data))
        check_val_scores_place(Path(val_scores), Path(out))
        if Path(val_scores).resolve().parent in folders:   # (the next run would train on it as a part)
            raise InputError(f"{val_scores}: is in the folder DATA {Path(val_scores).parent}, whose tables are the "
                             "parts: write it elsewhere")
    reading = settings_reading(overrides)   # (a bad setting is refused here, before any table is read)
    parts = [load_table(path, missing=overrides.get("missing", TrainConfig.missing), encoding=encoding,
                        reading=reading) for path in data]
    for part in parts:
        report_filled(part)
        report_time_gap(part, training=True)
    parts = parts[:1] + [in_order_of(parts[0], part) for part in parts[1:]]   # (other sensors: refused here)
    table = parts[0] if len(parts) == 1 else joined(parts)   # (what a sensor does over all the parts)
    check_sensor_count(table)   # (refused before any note about its sensors)
    check_rate_sensors(table, overrides.get("rate_sensors", ()))
    report_constant(table)
    report_counters(table, overrides.get("rate_sensors", ()))
    report_extreme_range(table)
    out = Path(out)
    ckpt = checkpoint_dir_for(out)
    created = _first_missing(ckpt)   # what the sensors record creates: the folder, and any missing parents
    if nproc > 1 or under_torchrun():
        # --resume against the recorded data, here for the ranks (which do not go through MSCRED.fit, where one
        # process checks it: the values are hashed once)
        import os

        with note_lines(show=os.environ.get("RANK", "0") == "0"):   # (torchrun's ranks all check it)
            signature = dataclasses.asdict(MSCRED(**overrides).resolved_config().signature)
            match_checkpoint_data(ckpt, table.sensors, table.values, table.source, resume,
                                  signature=record_signature(signature, parts))
    start = time.perf_counter()
    try:
        if nproc > 1 or under_torchrun():
            from mscred.distributed import summary_line, train_distributed

            summary = train_distributed(list(data), out, overrides, nproc=nproc, checkpoint_dir=ckpt, resume=resume,
                                        encoding=encoding)
            if summary is not None:  # None on the ranks > 0 of a torchrun launch
                click.echo(summary_line(summary))
            return
        model = MSCRED(**overrides)
        # A threshold fitted on too little, a setting this machine ignores (--bf16, --cuda-graphs): one "note:"
        # line each; --quiet drops the latter (a script passing --bf16 on every machine knows it may not apply)
        with note_lines(), warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore", IgnoredSettingWarning)
            model.fit(parts if len(parts) > 1 else table, checkpoint_dir=ckpt, resume=resume)
    except BaseException as err:
        trained = (ckpt / CHECKPOINT_NAME).exists()
        if created is not None and (not trained or isinstance(err, InputError)):
            # refused before any epoch, or bad input found after them (a resume would meet it again)
            shutil.rmtree(created, ignore_errors=True)
        elif trained and not isinstance(err, InputError):   # Ctrl-C, SIGTERM, an internal error, out of memory
            click.echo(f"the last finished epoch is kept in {ckpt}: the same command with --resume continues "
                       "from it", err=True)
        raise
    model.save(out)
    shutil.rmtree(ckpt, ignore_errors=True)   # the saved model supersedes the checkpoints
    if val_scores is not None:
        _write_validation_scores(model, parts, val_scores)
    last = model.history_[-1] if model.history_ else {}
    score = score_text(model.theta_, model.config_.score.method)
    click.echo(f"trained {len(model.history_)} epoch(s) in {time.perf_counter() - start:.1f} s "
               f"(val loss {last.get('val_loss', float('nan')):.4g}); {score}; threshold {model.threshold_:.4g}; "
               f"wrote {out}")


def score_text(theta, method: str) -> str:
    """The score a model flags by, for its summary line: the count score's residual thresholds (theta) or the
    method's name ("theta -" under the default z_sensor score once meant nothing to a reader)."""
    return f"theta {', '.join(f'{t:.3g}' for t in theta)}" if theta else f"score {method}"
