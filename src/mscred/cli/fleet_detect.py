"""`mscred fleet-detect FLEET DATA --out DIR`: every entity's new data scored with its own model, in one process."""
from __future__ import annotations

import click

from mscred.cli.params import (NamedPath, column_names, drop_columns_option, encoding_option, long_option,
                               na_value_option, time_column_option, time_zone_option)
from mscred.config import MISSING_POLICIES


@click.command()
@click.argument("fleet", type=NamedPath(file_okay=False, hint="give the folder `mscred fleet --out` wrote"))
@click.argument("data", type=NamedPath(file_okay=False, hint="give the folder of the entities' new tables"))
@click.option("--out", "out", required=True, type=NamedPath(file_okay=False, hint="give the scores a folder name"),
              help="Output folder: scores/<entity>.csv, summary.csv, events.csv (the fleet's alarm list), with "
                   "--report report.html, with --entity-reports reports/<entity>/.")
@click.option("--context", type=NamedPath(file_okay=False), default=None,
              help="A folder of the entities' previous tables (same names; of an entity's folder, its last table): "
                   "each entity's is put before its new data, so that every row is scored (as detect --context).")
@click.option("--sensor-scores", is_flag=True, help="Also a column score_<sensor> per sensor (as detect's).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
              help="Missing (NaN) sensor values: 'error', 'interpolate' or 'hold' [each model's setting].")
@click.option("--report", is_flag=True,
              help="Also write DIR/report.html: the entities, the fleet's alarms and the scores of the entities with "
                   "the most anomalous rows (needs pip install 'mscred[report]').")
@click.option("--entity-reports", is_flag=True,
              help="Also DIR/reports/<entity>/, the detection page of each entity with an alarm (as detect --report "
                   "writes it: alarms, score, sensor-score heat map, top sensors, worst windows), linked from "
                   "report.html (needs pip install 'mscred[report]').")
@click.option("--quiet", is_flag=True, help="No line per entity.")
@click.option("--metrics", type=NamedPath(dir_okay=False), default=None,
              help="Also FILE.prom, the run in Prometheus' text format for node_exporter's textfile collector: when "
                   "it ended and how long it took, and per entity whether it was scored (and why not), its rows, "
                   "anomalous rows, intervals and threshold. Written when the run ends, entities not scored too.")
@encoding_option
@time_column_option
@time_zone_option
@na_value_option
@long_option
@drop_columns_option
def fleet_detect(fleet, data, out, context, sensor_scores, device, missing, report, entity_reports, quiet, metrics,
                 encoding, time_column, time_zone, na_values, long_columns, drop_columns) -> None:
    """Score DATA, a folder of one table per entity (<entity>.csv, .parquet or .npy) or of one folder per entity of
    the tables its logger rolls (<entity>/, scored as one feed in name order), each with the model of its name in
    FLEET (the folder `mscred fleet` wrote, or a folder of model folders), into --out.

    An entity whose table is bad input (or has no model) is listed in summary.csv with the reason and the others
    are scored (exit 1); when none is scored, exit 2. Entities with a model and no new table are listed as such.
    """
    import time

    from mscred.cli.prometheus import check_metrics_path, write_fleet_detect
    from mscred.errors import InputError, PartlyDone
    from mscred.fleet import BAD_INPUT
    from mscred.fleet_detect import NO_DATA, detect_fleet, failed

    if report or entity_reports:   # before any work
        from mscred.report import require_matplotlib

        require_matplotlib("leave out --report" + (" and --entity-reports" if entity_reports else ""))
    if metrics is not None:
        check_metrics_path(metrics)
    echo = None if quiet else (lambda line: click.echo(line, err=True))
    started = time.time()
    summary = detect_fleet(fleet, data, out, context, sensor_scores=sensor_scores, device=device, missing=missing,
                           encoding=encoding, time_column=time_column, time_zone=time_zone, na_values=na_values,
                           long_columns=long_columns, drop_columns=column_names(drop_columns, "--drop-columns") or (),
                           report=report,
                           entity_reports=entity_reports, echo=echo)
    if metrics is not None:   # (before the exit status is decided: a run that scored nothing is what alerts want)
        write_fleet_detect(metrics, summary, started, time.time())
    bad = failed(summary)
    scored = int((summary["status"] == "ok").sum())
    if bad.any() and not scored and summary["status"][bad].str.startswith(BAD_INPUT).all():
        # nothing scored and every reason was the input: bad input, as for one table (exit 2)
        first = summary[bad].iloc[0]
        raise InputError(f"no entity scored (the summary: {out}/summary.csv); {first['entity']}: {first['status']}")
    waiting = int((summary["status"] == NO_DATA).sum())
    click.echo(f"scored {scored} of {scored + int(bad.sum())} entities with new data"
               f"{f' ({waiting} without)' if waiting else ''}: "
               f"{int(summary['anomalous'].fillna(0).astype(bool).sum())} with anomalous rows; wrote {out}")
    if bad.any():
        raise PartlyDone(f"{int(bad.sum())} entities not scored")
