"""`mscred calibrate MODEL_DIR DATA --out MODEL_DIR`: the thresholds fitted again on normal data, without training."""
from __future__ import annotations

import click

from mscred.cli.params import (FiniteFloatRange, NamedPath, column_names, drop_columns_option, encoding_option,
                               long_option, na_value_option,
                               time_column_option, time_zone_option)
from mscred.cli.train import score_overrides, score_text
from mscred.config import MISSING_POLICIES
from mscred.detect import SCORE_METHODS
from mscred.thresholds import READ_BY

@click.command()
@click.argument("model_dir", type=NamedPath(file_okay=False, hint="give the model's folder"))
@click.argument("data", type=NamedPath(dir_okay=False))
@click.option("--out", "out", required=True, type=NamedPath(file_okay=False, hint="give the model a folder name"),
              help="Model directory to write (MODEL_DIR itself to update it in place).")
@click.option("--score", "method", type=click.Choice(SCORE_METHODS), default=None,
              help="Window score [the model's].")
@click.option("--theta", type=str, default=None,
              help="Residual threshold of the count score: a number or 'auto' (a quantile of DATA's residuals); "
                   "implies --score count.")
@click.option("--threshold", type=click.Choice(["beta_max", "percentile", "pot"]), default=None,
              help="Anomaly threshold rule [the model's].")
@click.option("--beta", type=FiniteFloatRange(0, min_open=True), default=None,
              help="beta_max: threshold = beta x the largest score on DATA [the model's].")
@click.option("--percentile", type=FiniteFloatRange(0, 100), default=None,
              help="percentile: the q-th percentile of DATA's scores [the model's].")
@click.option("--pot-risk", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="pot: probability that a normal score exceeds the threshold [the model's].")
@click.option("--pot-level", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="pot: quantile of the initial threshold whose excesses are fitted [the model's].")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
              help="Missing (NaN) sensor values in DATA: 'error', 'interpolate' or 'hold' [the model's setting].")
@encoding_option
@time_column_option
@time_zone_option
@na_value_option
@long_option
@drop_columns_option
def calibrate(model_dir, data, out, method, theta, threshold, beta, percentile, pot_risk, pot_level, device, missing,
              encoding, time_column, time_zone, na_values, long_columns, drop_columns) -> None:
    """Fit MODEL_DIR's thresholds again on DATA, normal behaviour the model did not train on, and write the model
    to --out: the weights stay, what scoring learns from normal windows (the threshold, each scale's, the z_sensor
    score's per-sensor statistics) is refitted on every window of DATA. For alarms on normal operation after its
    noise moved, or another threshold rule, without training again.
    """
    from mscred.atomic import check_replaceable_dir
    from mscred.data.io import load_table
    from mscred.data.reading import Reading
    from mscred.detector import MODEL_FILES, MSCRED
    from mscred.errors import InputError, note_lines

    settings = {"beta": beta, "percentile": percentile, "pot_risk": pot_risk, "pot_level": pot_level,
                "threshold": threshold}
    settings = {key: value for key, value in settings.items() if value is not None}
    settings.update(score_overrides(theta, method))
    check_replaceable_dir(out, MODEL_FILES, "an mscred model")
    model = MSCRED.load(model_dir, device=device)
    rule = threshold or model.config_.score.threshold
    for key, readers in READ_BY.items():   # (an option of another rule would change nothing)
        if key in settings and rule not in readers:
            raise InputError(f"--{key.replace('_', '-')}: read by --threshold {readers[0]} only; the threshold rule "
                             f"is '{rule}'")
    table = load_table(data, missing=missing or model.config_.train.missing, encoding=encoding,
                       reading=Reading.of_model(model.config_.train, time_column, na_values, long_columns,
                                                column_names(drop_columns, "--drop-columns") or (), time_zone))
    with note_lines():
        model.calibrate(table, **settings)
    model.save(out)
    done, score = model.calibration_windows_, score_text(model.theta_, model.config_.score.method)
    excluded = f" ({done['excluded']} over rows labelled 1 left out)" if done["excluded"] else ""
    # (flagged counts of each calibration on its own scores: the z_sensor statistics are refitted with the threshold)
    click.echo(f"calibrated on {done['windows']} windows of {data}{excluded}; {score}; threshold "
               f"{done['threshold_before']:.4g} -> {done['threshold_after']:.4g} ({rule}); the new calibration flags "
               f"{done['flagged_after']} of them, the old one flagged {done['flagged_before']}; wrote {out}")
