"""`mscred watch MODEL_DIR DATA --out SCORES.csv`: a CSV file scored as something appends rows to it."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Iterator

import click

from mscred.cli.params import (NamedPath, column_names, drop_columns_option, encoding_option, na_value_option,
                               time_column_option, time_zone_option)
from mscred.cli.prometheus import MetricsFile, check_metrics_path, metrics_option
from mscred.cli.watch_output import OpenRun, Scores
from mscred.config import MISSING_POLICIES


@click.command()
@click.argument("model_dir", type=NamedPath(file_okay=False, hint="give the model's folder"))
@click.argument("data", type=NamedPath())
@click.option("--out", "out", required=True, type=NamedPath(dir_okay=False),
              help="SCORES.csv (or .tsv) to write, a chunk of rows at a time as DATA grows; '-' for standard "
                   "output (the alarm, clear and summary lines then go to standard error).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
              help="Missing (NaN) sensor values in DATA: 'error', 'interpolate' or 'hold' [the model's setting, from "
                   "train; the sensors train held with --hold are held whatever this says].")
@click.option("--sensor-scores", is_flag=True, help="Also a column score_<sensor> per sensor, as detect's.")
@click.option("--events", type=NamedPath(dir_okay=False), default=None,
              help="Also EVENTS.csv, the alarm list: a row appended as each run of anomalous rows ends (detect "
                   "--events' columns: start, end, rows, peak_score, peak_at, root_causes, scales).")
@click.option("--interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds between looks at DATA.")
@click.option("--idle-exit", type=click.FloatRange(min=0), default=None,
              help="Stop once DATA has gained no complete line for this many seconds [watch until Ctrl-C].")
@click.option("--resume", is_flag=True,
              help="Continue an earlier watch of DATA into SCORES.csv (restarted after a stop): the rows of DATA it "
                   "holds already are the feed's history, not scored again; the rest are appended to it.")
@click.option("--new-only", is_flag=True,
              help="Score only the lines DATA gains from now on: the rows it holds at the start are the feed's "
                   "history (the windows over the first new rows reach into them), not scored or written.")
@click.option("--json", "as_json", is_flag=True,
              help="Each alarm, clear and the summary as one JSON object a line on stdout (event, the row's "
                   "timestamp or row, score, threshold, root_causes; start, rows, peak_score; the counts and files), "
                   "for scripts.")
@metrics_option
@encoding_option
@time_column_option
@time_zone_option
@na_value_option
@drop_columns_option
def watch(model_dir, data, out, device, missing, sensor_scores, events, interval, idle_exit, resume, new_only,
          as_json, metrics, encoding, time_column, time_zone, na_values, drop_columns) -> None:
    """Score DATA, a CSV file that something appends rows to, as it grows.

    Every complete line DATA gains is scored after the rows before it (the rows already in DATA first), and
    SCORES.csv gains detect's columns for it: every row is scored once DATA holds one window's rows (100 at the
    defaults). A line still being written waits for its newline (at --idle-exit, a last line without one is taken
    as complete). Each anomaly's first row prints an 'alarm:' line on stdout with its time, score and root
    causes, and the first row after it a 'clear:' line with its rows and peak score. Stops on Ctrl-C (or after
    --idle-exit seconds without a new line) with a summary, as on SIGTERM (then exit 143); a bad row stops it
    with exit 2, the rows before it scored and written.

    A file rotated in place (renamed and created again, or cut short) is followed as tail -F follows it, with a
    note on stderr. DATA may be a folder whose CSV files a logger rolls (one a day, named so that they sort in
    time order): the files are one feed, in name order, and once a later file appears the watch moves on to it.
    Parquet files in it are parts of the feed read whole, each once it is complete. DATA of a model trained on a
    long table (train --long) is read as one: a time's lines are scored once a later time's line arrives (the writer
    may be mid-way through them), the last time's at --idle-exit. DATA '-' follows a CSV piped into standard input,
    its first line the header (ssh host tail -n +1 -F feed.csv | mscred watch MODEL - --out SCORES.csv), until its
    writer closes the pipe.
    """
    from mscred.cli.stdio import STDIN_NAME, STDIO
    from mscred.data.follow import GrowingCsv, RollingFolder, StdinLines
    from mscred.data.long_feed import followed
    from mscred.data.reading import Reading
    from mscred.data.io import check_writable_table, is_plain_text
    from mscred.detector import MSCRED
    from mscred.errors import InputError

    piped, to_stdout = str(data) == STDIO, str(out) == STDIO
    if events is not None and str(events) == STDIO:
        raise InputError("--events '-': only --out may be standard output (the scores); give the events a file")
    if to_stdout and resume:
        raise InputError("--resume with --out '-': standard output holds no scores to continue; give a file")
    for path in ([] if to_stdout else [out]) + ([events] if events is not None else []):
        check_writable_table(path, inputs=[] if piped else [data])
        if not is_plain_text(path):
            raise InputError(f"{path}: watch appends to its output as it scores: give a .csv or .tsv file")
    if resume and new_only:
        raise InputError("--resume and --new-only: give one (--resume continues SCORES.csv; --new-only starts a "
                         "new one after DATA's rows)")
    if events is not None and not to_stdout and Path(events).resolve() == Path(out).resolve():
        raise InputError(f"{events}: --events is --out; give the events another name")
    if metrics is not None:
        check_metrics_path(metrics)
    if piped and (resume or new_only):
        raise InputError(f"{'--resume' if resume else '--new-only'} with DATA '-': standard input holds no rows "
                         "from before the watch; follow the feed's file instead, or pipe only the new lines in")
    if piped:
        follower = StdinLines(encoding=encoding)
    elif Path(data).is_dir():
        for path in ([] if to_stdout else [out]) + ([events] if events is not None else []):
            if Path(path).resolve().parent == Path(data).resolve():
                raise InputError(f"{path}: is in the watched folder {data}, whose tables are the feed: write it "
                                 "elsewhere")
        follower = RollingFolder(data, encoding=encoding)
    else:
        follower = GrowingCsv(data, encoding=encoding)
    model = MSCRED.load(model_dir, device=device)
    stream = follower if piped else None
    # read as the model reads its data (a long table's lines made wide, each time once complete: data.long_feed)
    reading = Reading.of_model(model.config_.train, time_column, na_values,
                               drop_columns=column_names(drop_columns, "--drop-columns") or (), time_zone=time_zone)
    follower = followed(follower, reading, model.sensors_)
    monitor = model.monitor(sensor_scores=sensor_scores, missing=missing)
    scores = Scores(out, model.threshold_, events=events, top_k=model.config_.score.top_k, as_json=as_json)
    exported = None if metrics is None else MetricsFile(metrics, label="data")

    label = STDIN_NAME if piped else str(data)

    def feeds(stopped=None) -> dict:   # (the one feed, as MetricsFile takes a fleet's)
        return {label: (scores, stopped)}

    def poll(final: bool) -> bool:
        gained = poll_once(follower, monitor, scores, final)
        if exported is not None:
            exported.after_poll(feeds(), gained)
        return gained

    with stopped_by_a_person() as terminated:
        try:
            if resume:
                resume_scores(follower, monitor, scores)
            elif new_only:
                take_as_history(follower, monitor, scores)
            follow_until_idle(poll, interval, idle_exit, ended=None if stream is None else lambda: stream.ended)
        except InputError as err:   # (a bad row: the metrics say the watch stopped, then its one error line)
            if exported is not None:
                from mscred.cli.main import one_line

                exported.write(feeds(one_line(err)))
            raise
        finally:
            follower.close()
            scores.close()
    if exported is not None:
        exported.write(feeds())
    scores.summary(label)
    show_stop_note(follower)
    terminated.raise_again()


class _Stop:
    """What ``stopped_by_a_person`` caught: SIGTERM to pass on once the summary is said."""

    def __init__(self):
        self.terminated = None

    def raise_again(self) -> None:
        if self.terminated is not None:
            raise self.terminated


@contextlib.contextmanager
def stopped_by_a_person() -> Iterator[_Stop]:
    """Ctrl-C and SIGTERM end a watch's loop the same way: the block's files closed, then the caller says its
    summary. Ctrl-C is how a watch is stopped (exit 0); SIGTERM (`systemctl stop`, a supervisor) still exits 143
    after the summary -- ``raise_again`` -- as every command does, where it ended the watch without one before."""
    from mscred.cli.main import Terminated

    stop = _Stop()
    try:
        yield stop
    except KeyboardInterrupt:
        pass
    except Terminated as err:
        stop.terminated = err


def resume_scores(follower, monitor, scores) -> None:
    """``--resume``: the rows of DATA that SCORES.csv holds (as many as it has rows, its last row's time or row
    number checked against DATA's) primed as history, the rest scored and appended. DATA's rows come a poll at a
    time (a folder's a file at a time), each primed or scored under its own file's name. A DATA whose first time
    comes after SCORES.csv's last (rotated while no watch ran) is scored whole as the feed's next rows, with a
    note: its first rows have no history, and those no window covers yet score 0."""
    from mscred.errors import InputError

    if not scores.path.exists():   # (said with the follower's notes, once rows are scored: a refused first row
        follower.notes.append(      # then keeps its error the one line on stderr)
            f"note: {scores.path} not found: nothing to resume; scoring {follower.path} from its first row")
        return
    import pandas as pd

    from mscred.data.io import TIMESTAMP

    try:
        written = pd.read_csv(scores.path, sep=scores.sep, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise InputError(f"{scores.path}: cannot be read as the scores of a watch ({type(err).__name__}); "
                         "--resume continues the same watch") from None
    held = len(written)
    if not held:
        raise InputError(f"{scores.path}: no rows to resume after; remove it or run without --resume")
    there = 0     # DATA's rows primed so far
    while there < held and (rows := _next_rows(follower)) is not None:
        if not there:
            index = TIMESTAMP if TIMESTAMP in rows.columns else "row"
            _check_columns(written, monitor.columns(index) + (["filled"] if monitor.fills else []),
                           scores.path)
            if index == TIMESTAMP and _comes_after(rows[index].iloc[0], written[index].iloc[-1]):
                found = scored_rows(monitor, rows, follower.where())   # (a refused row: its one error line alone)
                click.echo(f"note: {follower.where()} start after {scores.path}'s last row ({index} "
                           f"{written[index].iloc[-1]}): rotated since the last watch? Scored as the feed's next "
                           "rows; they have no history before them, and those no window covers yet score 0", err=True)
                scores.resume(held, OpenRun.at_end_of(written))
                scores.add(found)
                return
        take = min(held - there, len(rows))
        monitor.prime(rows.iloc[:take], source=follower.where())
        there += take
        if there == held:
            last = rows[index].iloc[take - 1] if index == TIMESTAMP else held - 1
            _check_last_row(written[index].iloc[-1], last, index, held, scores.path, follower.path)
            if take < len(rows):
                scores.resume(held, OpenRun.at_end_of(written))
                scores.add(scored_rows(monitor, rows.iloc[take:], follower.where(skip=take)))
                return
    if there < held:
        raise InputError(f"{scores.path}: {held} rows scored already, but {follower.path} has {there}: "
                         "--resume continues the watch of the same data")
    scores.resume(held, OpenRun.at_end_of(written))


def _next_rows(follower):
    """The follower's next rows for ``resume_scores``; of a feed that holds rows back (a long table's last time, a
    resampled feed's last period), the held ones too once the rest are read (held until later rows show them
    complete, but the last watch scored them: at its final poll)."""
    from mscred.data.follow import HeldBack

    rows = follower.poll()
    return follower.release() if rows is None and isinstance(follower, HeldBack) else rows


def _comes_after(value, text: str) -> bool:
    """Whether ``value`` (a time or number of DATA) comes after ``text`` (one written in SCORES.csv); False where
    they cannot be compared."""
    import pandas as pd

    try:
        return bool(value > (pd.Timestamp(text) if isinstance(value, pd.Timestamp) else float(text)))
    except (ValueError, TypeError):
        return False


def _check_columns(written, columns: list, path) -> None:
    """SCORES.csv's columns are those this watch writes (as ``scored_rows`` writes them)."""
    from mscred.errors import InputError

    if list(written.columns) != columns:
        raise InputError(f"{path}: its columns are not those this watch writes ({', '.join(columns[:6])}"
                         f"{', ...' if len(columns) > 6 else ''}): written from other data or with(out) "
                         "--sensor-scores; --resume continues the same watch")


def _check_last_row(written_last: str, last, index: str, held: int, path, data) -> None:
    """SCORES.csv's last row names the time (or row number) of DATA's row ``held``, as a CSV cell writes it."""
    import pandas as pd

    from mscred.errors import InputError

    shown = pd.DataFrame({index: [last]}).to_csv(index=False, header=False).strip()
    if written_last != shown:
        raise InputError(f"{path}: its last row is {index} {written_last}, but row {held} of {data} is {shown}: "
                         "--resume continues the watch of the same data")


def take_as_history(follower, monitor, scores) -> None:
    """``--new-only``: every row DATA holds now (a folder's every file) primed as history, not scored."""
    while (rows := follower.poll()) is not None:
        monitor.prime(rows, source=follower.where())
        scores.history += len(rows)


def scored_rows(monitor, rows, source: str):
    """The monitor's frame for ``rows``; with --missing interpolate also ``filled``, as detect writes it: how many
    of the row's sensor values were missing and filled (always there, so that every chunk has the same columns)."""
    found = monitor.update(rows, source=source)
    if monitor.fills:
        found["filled"] = rows[monitor.model.sensors_].isna().sum(axis=1).to_numpy()
    return found


def poll_once(follower, monitor, scores, final: bool = False) -> bool:
    """The lines ``follower`` gained, scored into ``scores``, then its notes shown; whether any came."""
    rows = follower.poll(final=final)
    gained = rows is not None and len(rows) > 0
    if gained:
        scores.add(scored_rows(monitor, rows, follower.where()))
    show_notes(follower)
    return gained


def follow_until_idle(poll, interval: float, idle_exit, ended=None) -> None:
    """``poll(final)`` (it scores what came and says whether anything did) every ``interval`` seconds, at once
    again after one that gained lines, until ``idle_exit`` seconds pass without any (or forever), or ``ended()``
    says the feed has ended (standard input closed by its writer); then once more with ``final``: the writers have
    stopped, so a last line without its newline is taken as complete. The loop of ``watch`` and ``fleet-watch``."""
    last_new = time.monotonic()
    while True:
        gained = poll(False)
        if ended is not None and ended():   # (asked after the poll: the poll is what finds the end)
            poll(True)
            return
        if gained:
            last_new = time.monotonic()
        elif idle_exit is not None and time.monotonic() - last_new >= idle_exit:
            poll(True)
            return
        else:
            time.sleep(interval)


def show_stop_note(follower) -> None:
    """After the summary, on stderr: the rows a feed held back and left unscored at the stop (a long feed's last
    time, a resampled feed's last period: ``HeldBack.stop_note``)."""
    from mscred.data.follow import HeldBack

    note = follower.stop_note() if isinstance(follower, HeldBack) else None
    if note is not None:
        click.echo(note, err=True)


def show_notes(follower) -> None:
    """The follower's notes (a rotated file) on stderr, once each: after the rows that followed were scored, so
    that a refused row's error stays the one line on stderr (it names the rotation too)."""
    for note in follower.notes:
        click.echo(note, err=True)
    follower.notes.clear()
