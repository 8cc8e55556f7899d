"""``--metrics FILE.prom``: Prometheus' text format for node_exporter's textfile collector
(``--collector.textfile.directory``), so that a fleet's watches and scoring jobs show on the dashboards and alert
rules its servers already have. ``Samples`` writes a file of metric families; ``MetricsFile`` is the state of
``mscred watch`` and ``mscred fleet-watch``, ``write_fleet_detect`` and ``write_detect`` the outcome of a
``mscred fleet-detect`` or ``mscred detect`` run.

Every file is rewritten whole (a temporary file renamed over it, as the collector asks: it must never read half a
file). A watch's is rewritten after a poll that scored rows (at most once a second), at least every
``HEARTBEAT_S`` seconds while the watch runs, and when it stops, so that ``mscred_watch_last_poll_timestamp_seconds``
(and the collector's own ``node_textfile_mtime_seconds``) tells a stalled watch from a quiet feed. Each feed is one
label value: ``data`` (the path given) for ``watch``, ``entity`` for ``fleet-watch``. The counters count this
process's rows: a restarted watch starts them at 0 again, which Prometheus' ``rate()`` and ``increase()`` take as
a counter reset.
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
_WATCH_FAMILIES = [
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


class Samples:
    """The samples of a file's metric families (``families``: (name, type, help) each, in the file's order), added
    one by one and written as the text format wants them: each family's HELP and TYPE once, then its samples."""

    def __init__(self, families: list[tuple[str, str, str]]):
        self.families = families
        self.samples: dict[str, list[str]] = {name: [] for name, _, _ in families}

    def add(self, family: str, value, **labels) -> None:
        """A sample of ``family`` (skipped when ``value`` is None or NaN), labelled in the order given."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return
        shown = ",".join(f'{key}="{_escaped(text)}"' for key, text in labels.items())
        self.samples[family].append(f"{family}{{{shown}}} {_number(value)}" if shown else
                                    f"{family} {_number(value)}")

    def text(self) -> str:
        lines = []
        for family, kind, said in self.families:
            if self.samples[family]:
                lines += [f"# HELP {family} {said}", f"# TYPE {family} {kind}", *self.samples[family]]
        return "\n".join(lines) + "\n"

    def write(self, path) -> None:
        """The file rewritten whole: a temporary file renamed over it (the collector must never read half a file)."""
        from mscred.atomic import atomic_path

        with atomic_path(path, what="the metrics file") as tmp:
            tmp.write_text(self.text(), encoding="utf-8")


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
        now = time.time() if now is None else now
        self.samples(feeds, now).write(self.path)
        self.written_at = now

    def render(self, feeds: dict, now: float) -> str:
        return self.samples(feeds, now).text()

    def samples(self, feeds: dict, now: float) -> Samples:
        samples = Samples(_WATCH_FAMILIES)
        for name, (scores, stopped) in feeds.items():
            def add(family: str, value, **extra) -> None:
                samples.add(family, value, **{self.label: name}, **extra)

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
                    add("mscred_sensor_score", float(value), sensor=column[len("score_"):])
        return samples


# (name, type, help) of each family of a fleet-detect run's file, in the order the file lists them
_FLEET_DETECT_FAMILIES = [
    ("mscred_fleet_detect_last_run_timestamp_seconds", "gauge", "When the last fleet-detect run ended (Unix "
                                                                "seconds)."),
    ("mscred_fleet_detect_duration_seconds", "gauge", "How long it took."),
    ("mscred_fleet_detect_scored", "gauge", "1 where the entity's new data was scored, 0 where it was not (bad "
                                            "input, no model, an error: the status label and summary.csv say "
                                            "why; no new data)."),
    ("mscred_fleet_detect_rows", "gauge", "Rows of the entity's new data."),
    ("mscred_fleet_detect_anomalous_rows", "gauge", "Anomalous rows among them."),
    ("mscred_fleet_detect_intervals", "gauge", "Runs of anomalous rows among them."),
    ("mscred_fleet_detect_threshold", "gauge", "The entity's model's threshold."),
]


def write_fleet_detect(path, summary, started: float, ended: float) -> None:
    """``path`` (FILE.prom) for a ``mscred fleet-detect`` run: its end and duration, and each entity's row of
    ``summary`` (``fleet_detect.COLUMNS``: status, rows, anomalous, intervals, threshold) as gauges labelled
    ``entity`` (and ``status``, a short form of its summary.csv status, on ``mscred_fleet_detect_scored``)."""
    import pandas as pd

    samples = Samples(_FLEET_DETECT_FAMILIES)
    samples.add("mscred_fleet_detect_last_run_timestamp_seconds", ended)
    samples.add("mscred_fleet_detect_duration_seconds", ended - started)
    for row in summary.itertuples(index=False):
        status = str(row.status)
        short = status.split(":")[0] if status != "ok" else "ok"   # ("bad input: <why>" -> "bad input")
        samples.add("mscred_fleet_detect_scored", int(status == "ok"), entity=row.entity, status=short)
        if status != "ok":
            continue
        for family, value in (("mscred_fleet_detect_rows", row.rows), ("mscred_fleet_detect_anomalous_rows",
                              row.anomalous), ("mscred_fleet_detect_intervals", row.intervals),
                              ("mscred_fleet_detect_threshold", row.threshold)):
            samples.add(family, None if pd.isna(value) else value, entity=row.entity)
    samples.write(path)


# (name, type, help) of each family of a detect run's file, in the order the file lists them
_DETECT_FAMILIES = [
    ("mscred_detect_last_run_timestamp_seconds", "gauge", "When the last detect run of this data ended (Unix "
                                                          "seconds)."),
    ("mscred_detect_duration_seconds", "gauge", "How long it took."),
    ("mscred_detect_rows", "gauge", "Rows of the data."),
    ("mscred_detect_scored_rows", "gauge", "Rows a window covers (the others score 0)."),
    ("mscred_detect_anomalous_rows", "gauge", "Anomalous rows."),
    ("mscred_detect_intervals", "gauge", "Runs of anomalous rows."),
    ("mscred_detect_threshold", "gauge", "The model's threshold."),
    ("mscred_detect_last_score", "gauge", "The score of the data's last row."),
]


def write_detect(path, data: str, frame, scored: int, intervals: int, threshold: float, started: float,
                 ended: float) -> None:
    """``path`` (FILE.prom) for a ``mscred detect`` run that scored ``data`` (the label: DATA as given): its end,
    duration and counts, from SCORES' ``frame``. Written once the outputs are, so a refused run leaves the last
    good run's file, whose time then goes stale (what an alert on it watches)."""
    samples = Samples(_DETECT_FAMILIES)
    for family, value in (("mscred_detect_last_run_timestamp_seconds", ended),
                          ("mscred_detect_duration_seconds", ended - started), ("mscred_detect_rows", len(frame)),
                          ("mscred_detect_scored_rows", scored),
                          ("mscred_detect_anomalous_rows", int(frame["is_anomaly"].sum())),
                          ("mscred_detect_intervals", intervals), ("mscred_detect_threshold", threshold),
                          ("mscred_detect_last_score", float(frame["score"].iloc[-1]) if len(frame) else None)):
        samples.add(family, value, data=data)
    samples.write(path)


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
