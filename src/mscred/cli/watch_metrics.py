"""``--metrics FILE.prom`` of ``mscred watch`` and ``mscred fleet-watch``: the watch's state in Prometheus' text
format, for node_exporter's textfile collector (``--collector.textfile.directory``), so that a fleet's watches
show on the dashboards and alert rules its servers already have.

The file is rewritten whole (a temporary file renamed over it, as the collector asks: it must never read half a
file) after a poll that scored rows (at most once a second), at least every ``HEARTBEAT_S`` seconds while the
watch runs, and when it stops, so that
``mscred_watch_last_poll_timestamp_seconds`` (and the collector's own ``node_textfile_mtime_seconds``) tells a
stalled watch from a quiet feed. Each feed is one label value: ``data`` (the path given) for ``watch``, ``entity``
for ``fleet-watch``. The counters count this process's rows: a restarted watch starts them at 0 again, which
Prometheus' ``rate()`` and ``increase()`` take as a counter reset.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Optional

from mscred.errors import InputError

HEARTBEAT_S = 5.0   # the longest the file goes unwritten while the watch runs
MIN_INTERVAL_S = 1.0   # the shortest between two writes (a busy feed polled every 10 ms; scrapes come every ~15 s)

# (name, type, help) of each metric family, in the order the file lists them
_FAMILIES = [
    ("mscred_score", "gauge", "Anomaly score of the last row scored (the model's score: z_sensor, mse or count)."),
    ("mscred_threshold", "gauge", "The model's threshold: a row scoring above it is anomalous."),
    ("mscred_anomalous", "gauge", "1 while the last row scored is anomalous (an alarm is open), else 0."),
    ("mscred_sensor_score", "gauge", "The last row's score of each sensor, what root_causes ranks "
                                     "(--sensor-scores)."),
    ("mscred_rows_scored_total", "counter", "Rows scored by this watch process."),
    ("mscred_anomalous_rows_total", "counter", "Anomalous rows among them."),
    ("mscred_alarms_total", "counter", "Alarms raised: runs of anomalous rows begun."),
    ("mscred_last_row_timestamp_seconds", "gauge", "The last row's timestamp (Unix seconds), where the data's "
                                                   "timestamps are dates."),
    ("mscred_last_scored_timestamp_seconds", "gauge", "When rows were last scored (Unix seconds)."),
    ("mscred_watch_last_poll_timestamp_seconds", "gauge", "When the watch last looked at its data (Unix seconds)."),
    ("mscred_stopped", "gauge", "1 where the feed was stopped by bad input (fleet-watch: the others go on), "
                                "else 0."),
]


def metrics_option(command):
    """``--metrics FILE.prom``, as ``watch`` and ``fleet-watch`` declare it."""
    import click

    from mscred.cli.params import NamedPath

    return click.option(
        "--metrics", type=NamedPath(dir_okay=False), default=None,
        help="Also FILE.prom, the watch's state in Prometheus' text format for node_exporter's textfile collector "
             "(last score and threshold, whether an alarm is open, rows, anomalous rows and alarms counted, when "
             "rows were last scored), rewritten after a poll that scored rows (at most once a second), every "
             f"{HEARTBEAT_S:g} s, and at the stop.")(command)


def check_metrics_path(path) -> None:
    """InputError unless ``path`` can be the metrics file: a ``.prom`` name, the one kind the collector reads (so it
    can be none of the command's data and outputs, which are tables; a folder is refused by the option's type)."""
    path = Path(path)
    if path.suffix != ".prom":
        raise InputError(f"{path}: --metrics is read by node_exporter's textfile collector, which reads only *.prom "
                         "files: give a .prom name")


class MetricsFile:
    """The .prom file of a watch's feeds. ``label``: the label naming a feed (``data`` or ``entity``)."""

    def __init__(self, path, label: str):
        self.path, self.label = Path(path), label
        self.written_at: Optional[float] = None
        self.scored_at: dict[str, float] = {}    # feed -> when its rows were last scored
        self.chunks: dict[str, int] = {}          # feed -> its chunks scored then

    def after_poll(self, feeds: dict, gained: bool) -> None:
        """Called after each poll of the watch: the file rewritten when rows were scored, or when the heartbeat is
        due. ``feeds``: label value -> (``watch_output.Scores`` or None, stopped reason or None)."""
        now = time.time()
        if gained:
            for name, (scores, _) in feeds.items():
                if scores is not None and scores.chunks != self.chunks.get(name, 0):
                    self.scored_at[name], self.chunks[name] = now, scores.chunks
        since = None if self.written_at is None else now - self.written_at
        if since is None or since >= HEARTBEAT_S or (gained and since >= MIN_INTERVAL_S):
            self.write(feeds, now)

    def write(self, feeds: dict, now: Optional[float] = None) -> None:
        from mscred.atomic import atomic_path

        now = time.time() if now is None else now
        text = self.render(feeds, now)
        with atomic_path(self.path, what="the metrics file") as tmp:
            tmp.write_text(text, encoding="utf-8")
        self.written_at = now

    def render(self, feeds: dict, now: float) -> str:
        samples: dict[str, list[str]] = {name: [] for name, _, _ in _FAMILIES}
        for name, (scores, stopped) in feeds.items():
            labels = f'{self.label}="{_escaped(name)}"'

            def add(family: str, value, extra: str = "") -> None:
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    samples[family].append(f"{family}{{{labels}{extra}}} {_number(value)}")

            add("mscred_stopped", int(stopped is not None))
            add("mscred_watch_last_poll_timestamp_seconds", now)
            if scores is None:
                continue
            add("mscred_threshold", scores.threshold)
            add("mscred_rows_scored_total", scores.rows)
            add("mscred_anomalous_rows_total", scores.anomalous)
            add("mscred_alarms_total", scores.alarms)
            add("mscred_anomalous", int(scores.run is not None))
            add("mscred_last_scored_timestamp_seconds", self.scored_at.get(name))
            last = scores.last
            if last is None:
                continue
            add("mscred_score", float(last["score"]))
            add("mscred_last_row_timestamp_seconds", _unix_seconds(last))
            for column, value in last.items():
                if isinstance(column, str) and column.startswith("score_"):
                    add("mscred_sensor_score", float(value), f',sensor="{_escaped(column[len("score_"):])}"')
        lines = []
        for family, kind, text in _FAMILIES:
            if samples[family]:
                lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}", *samples[family]]
        return "\n".join(lines) + "\n"


def _escaped(value: str) -> str:
    """A label value as the text format writes it: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value) -> str:
    """A sample's value: integers as such, any other number (numpy's float32 too) as Python writes its float."""
    import numbers

    return str(int(value)) if isinstance(value, numbers.Integral) else repr(float(value))


def _unix_seconds(last) -> Optional[float]:
    """The last row's timestamp in Unix seconds, where it is a date: a Timestamp, or ISO 8601 text (SCORES.csv keeps
    a time as DATA wrote it; other date text, '31/01/2024', is left out rather than read one way of two). Naive
    times are taken as UTC."""
    import pandas as pd

    stamp = last.get("timestamp")
    if isinstance(stamp, str):
        stamp = pd.to_datetime(stamp, format="ISO8601", errors="coerce")
    if not isinstance(stamp, pd.Timestamp) or pd.isna(stamp):
        return None
    if stamp.tzinfo is None:
        stamp = stamp.tz_localize("UTC")
    return stamp.timestamp()
