"""`mscred detect MODEL_DIR DATA --out SCORES.csv`: per-row scores, anomalies and root causes."""
from __future__ import annotations

from pathlib import Path

import click

from mscred.cli.params import (NamedPath, column_names, drop_columns_option, encoding_option, long_option,
                               na_value_option, time_column_option, time_zone_option)

from mscred.config import MISSING_POLICIES


@click.command()
@click.argument("model_dir", type=NamedPath(file_okay=False, hint="give the model's folder"))
@click.argument("data", type=NamedPath())
@click.option("--out", "out", required=True, type=NamedPath(dir_okay=False, allow_dash=True),
              help="SCORES.csv to write ('-': standard output, once everything is scored; the summary then goes "
                   "to stderr).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
              help="Missing (NaN) sensor values in DATA: 'error', 'interpolate' or 'hold' [the model's setting, from "
                   "train; the sensors train held with --hold are held whatever this says].")
@click.option("--context", type=NamedPath(dir_okay=False), default=None,
              help="The rows just before DATA (the feed's previous file; same sensors, times before DATA's): its "
                   "last rows complete the windows over DATA's first rows, so that every row of DATA is scored.")
@click.option("--sensor-scores", is_flag=True,
              help="Also a column score_<sensor> per sensor on every row: what the root causes are ranked by (under "
                   "the default z_sensor score each sensor's standardised residual, score being the largest); empty "
                   "where no window covers the row.")
@click.option("--events", type=NamedPath(dir_okay=False), default=None,
              help="Also write the anomalies as events, one row per run of flagged rows (start, end, rows, "
                   "peak_score, peak_at, root_causes ranked by the votes of its rows, scales), CSV or Parquet.")
@click.option("--json", "as_json", is_flag=True,
              help="The summary as one JSON object on stdout (rows, scored, anomalous, intervals, threshold, "
                   "context_rows, out, events, report), for scripts.")
@click.option("--report", "report_dir", type=NamedPath(file_okay=False), default=None,
              help="Also an HTML page of what was found, for data without ground truth: the alarms with their "
                   "root causes (and events.csv), the score against the threshold, each sensor's score as a heat "
                   "map, the top sensors around the alarms, the residual matrices of the worst windows (the "
                   "report extra: matplotlib).")
@click.option("--metrics", type=NamedPath(dir_okay=False), default=None,
              help="Also FILE.prom, the run in Prometheus' text format for node_exporter's textfile collector (when "
                   "it ended, how long it took, rows, rows scored, anomalous rows, intervals, threshold, the last "
                   "row's score), written once the outputs are: for a detect run by cron.")
@encoding_option
@time_column_option
@time_zone_option
@na_value_option
@long_option
@drop_columns_option
def detect(model_dir, data, out, device, missing, encoding, time_column, time_zone, na_values, long_columns,
           drop_columns, context, sensor_scores, events, as_json, report_dir, metrics) -> None:
    """Score DATA with the model in MODEL_DIR; write one row per input row to SCORES.csv.

    Columns: timestamp (or row), score, is_anomaly (0/1), root_causes (top sensors, ';'-joined, empty when
    normal), scales (window lengths that flag the row: 10 alone for a short anomaly, all for a long one); with
    --missing interpolate (or hold) and gaps in DATA, filled (how many of the row's sensor values were filled).
    Alone, DATA's first rows (90 at the defaults) have no full window and score 0; --context gives them one.
    DATA may be a folder of the tables a logger rolls: scored as one feed, its files in name order, each after the
    rows before it (SCORES.csv as of the feed as one table; untimed rows numbered through the files). DATA '-'
    reads a CSV (gzipped too) or Parquet table from standard input.
    """
    from mscred.cli.stdio import STDIN_NAME, STDIO, stdin_as_file
    from mscred.errors import InputError

    for option, value in (("--events", events), ("--context", context)):
        if value is not None and str(value) == STDIO:
            raise InputError(f"{option} '-': only DATA and --out may be standard input and output; give a file")
    if metrics is not None:
        from mscred.cli.prometheus import check_metrics_path

        check_metrics_path(metrics)
    if report_dir is not None:   # before any work: matplotlib there, and a folder of other files refused
        from mscred.atomic import check_replaceable_dir
        from mscred.detection_report import DETECTION_REPORT_FILES
        from mscred.report import require_matplotlib

        require_matplotlib()
        check_replaceable_dir(report_dir, DETECTION_REPORT_FILES, "an mscred detection report")
    with stdin_as_file(data) as path:
        _detect(model_dir, path, out, device, missing, encoding, context, sensor_scores, events, as_json, metrics,
                STDIN_NAME if str(data) == STDIO else str(data), report_dir,
                (time_column, na_values, long_columns, column_names(drop_columns, "--drop-columns") or (), time_zone))


def _detect(model_dir, data, out, device, missing, encoding, context, sensor_scores, events, as_json, metrics,
            label: str, report_dir=None, read_as=(None, (), None, (), None)) -> None:
    """``detect`` of DATA as a path (standard input's copy for '-'; ``label``: DATA as the metrics name it;
    ``read_as``: --time-column, --na-value, --long, --drop-columns and --time-zone, over the model's)."""
    import time

    started = time.time()
    from mscred.atomic import atomic_path
    from mscred.cli.stdio import STDIO
    from mscred.cli.train import report_filled, report_time_gap
    from mscred.data.context import seam_note
    from mscred.data.io import check_writable_table, write_table
    from mscred.data.reading import Reading
    from mscred.detect import without_sensor_scores
    from mscred.detector import MSCRED
    from mscred.errors import InputError
    from mscred.events import events_table
    from mscred.feed import feed_tables, score_feed
    from mscred.fleet import tables_given
    from mscred.metrics import events as runs

    files = tables_given(data, "to score")   # (a folder's, as one feed)
    if Path(data).is_dir():   # (a file written there would be scored as the feed's next by the next run)
        for path, instead in [(out, "write it elsewhere"), (events, "write it elsewhere"),
                              (report_dir, "write it elsewhere"), (context, "give the rows before it from elsewhere")]:
            if path is not None and Path(path).resolve().parent == Path(data).resolve():
                raise InputError(f"{path}: is in the folder DATA {data}, whose tables are the feed: {instead}")
    inputs = files + ([context] if context else [])
    to_stdout = str(out) == STDIO
    if not to_stdout:
        check_writable_table(out, inputs=inputs)
    if events is not None:
        if not to_stdout and Path(events).resolve() == Path(out).resolve():
            raise InputError(f"{events}: --events is --out; give the events another name")
        check_writable_table(events, inputs=inputs)
    if context and Path(context).resolve() == Path(data).resolve():
        raise InputError(f"{context}: --context is DATA itself; give the file of the rows before DATA")
    model = MSCRED.load(model_dir, device=device)
    missing = missing or model.config.train.missing
    # (the label column is ground truth, which scoring does not use: not checked here, as evaluate checks it)
    read_options = dict(missing=missing, ignore_label=True, encoding=encoding,
                        reading=Reading.of_model(model.config.train, *read_as))
    before, tables = feed_tables(files, context, **read_options)
    # (the report's heat map needs each sensor's score: computed for it, written to SCORES only if asked for)
    feed = score_feed(model, tables, before, sensor_scores=sensor_scores or report_dir is not None)
    frame = feed.frame
    # Notes about the data once it scored (a table refused by the model, e.g. for its sensors, gets its one line)
    for previous, table in zip([before] + feed.tables[:-1], feed.tables):
        report_filled(table)
        report_time_gap(table)   # (a window over a plant stop scores both sides as one)
        note = seam_note(previous, table) if previous is not None else None
        if note:
            click.echo(f"note: {note}", err=True)
    if any(table.gaps is not None for table in feed.tables):  # scores resting on interpolated values are marked
        import numpy as np

        frame["filled"] = np.concatenate([table.gaps.sum(axis=1) if table.gaps is not None
                                          else np.zeros(len(table.values), dtype=np.int64) for table in feed.tables])
    found = runs(frame["is_anomaly"].to_numpy())
    used = feed.context_rows
    uncovered = len(frame) - feed.scored(model)
    if report_dir is not None:   # (before SCORES: on standard output nothing may come before every output is made)
        from mscred.detection_report import feed_report

        feed_report(report_dir, frame, feed.tables, model, model_dir, label, len(frame) - uncovered)
    if not sensor_scores:
        frame = without_sensor_scores(frame)
    if events is not None:
        with atomic_path(events) as tmp:
            write_table(events_table(frame, top_k=model.config_.score.top_k), tmp)
    if to_stdout:   # (last: nothing on stdout unless every output was made)
        click.echo(frame.to_csv(index=False), nl=False)
    else:
        with atomic_path(out) as tmp:
            write_table(frame, tmp)
    # Rows no window covers (before the first full window, a few after the last segment) score 0: said (in the
    # summary below), since "scored 1500 rows" read as if every row had been judged.
    if metrics is not None:
        from mscred.cli.prometheus import write_detect

        write_detect(metrics, label, frame, len(frame) - uncovered, len(found), float(model.threshold_), started,
                     time.time())
    if as_json:
        import json

        click.echo(json.dumps({"rows": len(frame), "scored": len(frame) - uncovered,
                               "anomalous": int(frame["is_anomaly"].sum()), "intervals": len(found),
                               "threshold": float(model.threshold_), "context_rows": used, "out": str(out),
                               "events": None if events is None else str(events),
                               "report": None if report_dir is None else str(report_dir)}), err=to_stdout)
        return
    unscored = f" ({uncovered} before the first full window or after the last segment score 0)" if uncovered else ""
    after = f" after {used} rows of context" if before is not None else ""
    click.echo(f"scored {len(frame) - uncovered} of {len(frame)} rows{after}{unscored}: "
               f"{int(frame['is_anomaly'].sum())} anomalous in {len(found)} interval(s) (threshold "
               f"{model.threshold_:.4g}); wrote {'standard output' if to_stdout else out}"
               + (f" and {events}" if events is not None else "")
               + (f"; report: {Path(report_dir) / 'index.html'}" if report_dir is not None else ""), err=to_stdout)
