"""`mscred evaluate SCORES.csv --labels DATA_OR_LABELS [--json] [--report DIR]`: metrics beside a random baseline."""
from __future__ import annotations

import json
import math
from pathlib import Path

import click

from mscred.cli.params import (COLUMN_NAME, LONG_COLUMNS, MISSING_TEXT, PERIOD, SEED, STATES, TIME_ZONE,
                               FiniteFloatRange, NamedPath, encoding_option)
from mscred.config import MISSING_POLICIES, ScoreConfig
from mscred.thresholds import READ_BY

_DEFAULTS = ScoreConfig()

# The options each refit threshold reads: one given for another --threshold did nothing, without a word (a
# --val-scores beside the default 'detector' looked like a refit; even a missing file passed).
_THRESHOLD_OPTIONS = {**READ_BY, "val_scores": ("beta_max", "percentile", "pot", "spot")}




def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _threshold_predictions(method: str, scores, val_scores_path, cfg: ScoreConfig):
    """Predictions from a threshold fitted on the validation scores of ``val_scores_path``."""
    import numpy as np

    from mscred.errors import InputError
    from mscred.evaluation import read_scores
    from mscred.pot import spot
    from mscred.thresholds import choose_threshold

    if val_scores_path is None:
        raise InputError(f"--threshold {method} needs --val-scores (the SCORES.csv of normal validation data)")
    val = read_scores(val_scores_path).score
    need = 2 if method in ("pot", "spot") else 1     # (the tail fit's minimum; pot() and spot() say so too)
    if len(val) < need:
        raise InputError(f"{val_scores_path}: {len(val)} validation score(s); --threshold {method} needs at least "
                         f"{need}")
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused below, not a RuntimeWarning
        if method == "spot":
            thresholds, alarms = spot(val, scores.score, risk=cfg.pot_risk, level=cfg.pot_level)
            pred, threshold = alarms.astype(np.int8), float(thresholds[-1])
        else:
            threshold = float(choose_threshold(method, val, cfg))
            pred = (scores.score > threshold).astype(np.int8)
    if not math.isfinite(threshold):   # (printed as Infinity: --json was no longer JSON)
        raise InputError(f"{val_scores_path}: --threshold {method} on these validation scores gives a threshold of "
                         f"{threshold:g}, not a finite number (float64 overflow: the scores"
                         f"{' or --beta' if method == 'beta_max' else ''} too large)")
    return pred, threshold


def _check_threshold_options(ctx: click.Context, threshold: str) -> None:
    """InputError for an option given on the command line that ``threshold`` does not read."""
    from click.core import ParameterSource

    from mscred.errors import InputError

    for name, methods in _THRESHOLD_OPTIONS.items():
        if threshold not in methods and ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
            flag = "--" + name.replace("_", "-")
            listed = ", ".join(methods[:-1]) + (" or " if len(methods) > 1 else "") + methods[-1]
            raise InputError(f"{flag} is read by --threshold {listed} only; --threshold is '{threshold}'")


def _check_vus_window(window: int, scores) -> None:
    """VUS widens every event by up to ``window`` rows on each side over 2 x window + 1 buffers: a window longer
    than the scores (and the default 100) measures nothing more and ran for hours (--vus-window 10000000 on 10
    rows: one Python pass per buffer)."""
    from mscred.errors import InputError
    from mscred.vus import DEFAULT_SLIDING_WINDOW

    most = max(len(scores.score), DEFAULT_SLIDING_WINDOW)
    if window > most:
        raise InputError(f"--vus-window {window}: more than the {len(scores.score)} rows of {scores.source} and the "
                         f"default {DEFAULT_SLIDING_WINDOW} (VUS widens each event by up to that many rows a side)")


@click.command()
@click.argument("scores_path", metavar="SCORES.csv", type=NamedPath(dir_okay=False))
@click.option("--labels", "labels_path", required=True, type=NamedPath(dir_okay=False),
              help="Ground truth: a CSV/Parquet with a 'label' column (e.g. test.csv), or an anomalies.csv with "
                   "start,end,root_causes.")
@click.option("--anomalies", type=NamedPath(dir_okay=False), default=None,
              help="anomalies.csv with the events and their root causes [default: the one beside --labels, if "
                   "any]; 'none': no anomalies table (events from the label column, no root causes).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--report", "report_dir", type=NamedPath(file_okay=False), default=None,
              help="Write a self-contained HTML report into this directory.")
@click.option("--model", "model_dir", type=NamedPath(file_okay=False), default=None,
              help="Model directory: the residual signature matrices in the report, and --labels and --data read "
                   "as it reads its data (its time column, zone, missing-value text, long table, grid and states).")
@click.option("--data", "data_path", type=NamedPath(dir_okay=False), default=None,
              help="The scored data (for the report's series and residuals), row for row the SCORES rows "
                   "[default: --labels when it holds sensor columns].")
@click.option("--threshold", type=click.Choice(["detector", "beta_max", "percentile", "pot", "spot"]),
              default="detector", show_default=True,
              help="'detector': the is_anomaly column as written; otherwise refit on --val-scores.")
@click.option("--val-scores", type=NamedPath(dir_okay=False), default=None,
              help="SCORES.csv of normal validation data, for --threshold other than 'detector'.")
@click.option("--beta", type=FiniteFloatRange(0, min_open=True), default=_DEFAULTS.beta, show_default=True,
              help="beta_max: threshold = beta x max(validation score).")
@click.option("--percentile", type=FiniteFloatRange(0, 100), default=_DEFAULTS.percentile, show_default=True,
              help="percentile: the q-th percentile of the validation scores.")
@click.option("--pot-risk", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=_DEFAULTS.pot_risk,
              show_default=True, help="pot/spot: probability that a normal score exceeds the threshold.")
@click.option("--pot-level", type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
              default=_DEFAULTS.pot_level, show_default=True,
              help="pot/spot: quantile of the initial threshold whose excesses are fitted (GPD).")
@click.option("--vus-window", type=click.IntRange(min=1), default=100, show_default=True,
              help="VUS sliding window L (buffers 0..2L, as TSB-AD).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the random baseline.")
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default="error", show_default=True,
              help="Missing (NaN) sensor values in the data tables (--labels, --data): as given to detect.")
@encoding_option
@click.option("--time-column", "time_column", type=COLUMN_NAME, default=None, metavar="NAME",
              help="The time column of --labels and --data where it is not named 'timestamp' (as given to train) "
                   "[default: --model's].")
@click.option("--time-zone", "time_zone", type=TIME_ZONE, default=None, metavar="ZONE",
              help="The time zone of --labels', --anomalies' and --data's local times written without a UTC offset "
                   "(as given to train; an event's start or end in the hour the clocks go back needs its offset) "
                   "[default: --model's].")
@click.option("--na-value", "na_values", type=MISSING_TEXT, multiple=True, metavar="TEXT",
              help="Text that stands for a missing sensor value in --labels and --data (as given to train; "
                   "--model's besides).")
@click.option("--long", "long_columns", type=LONG_COLUMNS, default=None, metavar="SENSOR,VALUE",
              help="--data is a long table, one value a row (as given to train) [default: --model's].")
@click.option("--resample", "resample", type=PERIOD, default=None, metavar="PERIOD",
              help="Put --labels and --data on the time grid of SCORES.csv (as given to train): a period's label is 1 "
                   "where any of its rows is [default: --model's, where it has one].")
@click.option("--states", "states", type=STATES, multiple=True, metavar="NAME=STATE,...",
              help="A column of text states in --labels and --data read as each state's position (as given to "
                   "train) [default: --model's].")
@click.pass_context
def evaluate(ctx, scores_path, labels_path, anomalies, as_json, report_dir, model_dir, data_path, threshold,
             val_scores, beta, percentile, pot_risk, pot_level, vus_window, seed, missing, encoding,
             time_column, time_zone, na_values, long_columns, resample, states) -> None:
    """Score SCORES.csv (from `mscred detect`) against ground truth, beside a seeded random baseline.

    --encoding is that of the user's tables (--labels, --anomalies, --data); SCORES.csv and --val-scores, written
    by mscred, are always read as UTF-8.
    """
    from mscred.data.reading import Reading
    from mscred.errors import note_lines

    _check_threshold_options(ctx, threshold)
    if model_dir is not None:   # (the model's grid is the scores'; the labels and data read as it reads its data)
        from mscred.evaluation import model_reading

        saved = model_reading(model_dir)
        time_column, time_zone = time_column or saved["time_column"], time_zone or saved["time_zone"]
        resample, long_columns = resample or saved["resample"], long_columns or saved["long_columns"]
        na_values = tuple(dict.fromkeys((*saved["na_values"], *na_values)))
        states = states or saved["states"]
    with note_lines():   # (a labels table and an anomalies.csv beside it that disagree: one note line)
        _evaluate(scores_path, labels_path, anomalies, as_json, report_dir, model_dir, data_path, threshold,
                  val_scores, beta, percentile, pot_risk, pot_level, vus_window, seed, missing, encoding,
                  Reading(time_column, tuple(na_values), resample=resample, time_zone=time_zone, states=tuple(states)),
                  Reading(time_column, tuple(na_values), long_columns, resample, time_zone=time_zone,
                          states=tuple(states)))


def _evaluate(scores_path, labels_path, anomalies, as_json, report_dir, model_dir, data_path, threshold, val_scores,
              beta, percentile, pot_risk, pot_level, vus_window, seed, missing, encoding, reading=None,
              data_reading=None) -> None:
    from mscred.evaluation import compute_metrics, read_data, read_ground_truth, read_scores, sensor_pool

    if report_dir is not None:  # refuse a folder of other files before any work (atomic.check_replaceable_dir)
        from mscred.atomic import check_replaceable_dir
        from mscred.report import REPORT_FILES
        check_replaceable_dir(report_dir, REPORT_FILES, "an mscred report")
    scores = read_scores(scores_path)
    _check_vus_window(vus_window, scores)
    truth = read_ground_truth(labels_path, scores, anomalies, missing=missing, encoding=encoding, reading=reading)
    # before any figure: data that is not the scored rows (another file, a shifted copy) is bad input, as labels are
    data = read_data(data_path, scores, missing, encoding, data_reading) if data_path is not None else None
    pred, thr = None, None
    if threshold != "detector":
        cfg = ScoreConfig(beta=beta, percentile=percentile, pot_risk=pot_risk, pot_level=pot_level)
        pred, thr = _threshold_predictions(threshold, scores, val_scores, cfg)
    result = compute_metrics(scores, truth, pred=pred, sliding_window=vus_window, seed=seed,
                             sensors=sensor_pool(truth, model_dir, data))
    result["threshold_method"] = threshold
    if thr is not None:
        result["threshold"] = thr
    if report_dir is not None:  # after the threshold fields: the report shows the threshold in use
        from mscred.report import build_report

        build_report(report_dir, scores, truth, result, pred=pred, model_dir=model_dir, data_path=data_path,
                     missing=missing, data=data, encoding=encoding)
    if as_json:
        click.echo(json.dumps(result))
        return
    _print_table(result, report_dir)


def _print_table(result: dict, report_dir) -> None:
    from rich.console import Console
    from rich.table import Table

    from mscred.evaluation import event_notes, metric_rows

    base = result["random_baseline"]
    table = Table(title=f"mscred evaluate ({result['n_rows']} rows, {result['n_anomalous_rows']} anomalous, "
                        f"{result['n_flagged_rows']} flagged; threshold: {result['threshold_method']})")
    table.add_column("metric")
    table.add_column("mscred", justify="right")
    table.add_column(f"random (seed {base['seed']})", justify="right")
    table.add_column("note", style="dim")
    for key, label, note in metric_rows(result):
        table.add_row(label, _fmt(result[key]), _fmt(base.get(key)), note)
    console = Console()
    console.print(table)
    for note in event_notes(result):
        console.print(f"note: {note}")
    if report_dir is not None:
        console.print(f"report: {Path(report_dir) / 'index.html'}")
