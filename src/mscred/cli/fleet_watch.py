"""`mscred fleet-watch FLEET LIVE --out DIR`: every entity's growing CSV scored with its own model, in one process.

What `mscred watch` does for one file, for a fleet: LIVE is a folder of one CSV per entity (``<entity>.csv``,
named as `mscred fleet` names its models), each followed as it grows (``data.follow.GrowingCsv``: rotations
included), or of one folder per entity (``<entity>/``) whose files a logger rolls (``RollingFolder``, as
`watch DIR` follows them), and scored after its own rows before (a ``Monitor`` of the entity's model). One `mscred
watch` per entity would hold Python, torch, a model and its scoring batch's memory for each (1.3 GB at its peak for
30 sensors on the CPU, benchmarks/results/fleet_watch/); here there is one process, and an entity's model is loaded
when its file first appears.

An entity whose file turns bad (a refused row, times that go back) is stopped with a line on stderr and the others
go on; the command then ends with exit 1 (``PartlyDone``), as `fleet` does when some entities fail.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import click
import pandas as pd

from mscred.cli.params import (NamedPath, column_names, drop_columns_option, encoding_option, na_value_option,
                               time_column_option, time_zone_option)
from mscred.cli.prometheus import MetricsFile, check_metrics_path, metrics_option
from mscred.config import MISSING_POLICIES

SUMMARY_COLUMNS = ["entity", "status", "file", "rows", "anomalous", "alarms", "threshold"]


@click.command("fleet-watch")
@click.argument("fleet", type=NamedPath(file_okay=False, hint="give the folder `mscred fleet --out` wrote"))
@click.argument("live", type=NamedPath(file_okay=False, hint="give the folder of the entities' growing CSV files"))
@click.option("--out", "out", required=True, type=NamedPath(file_okay=False, hint="give the scores a folder name"),
              help="Output folder: scores/<entity>.csv, written as each entity's file grows (and with --events "
                   "events/<entity>.csv), and summary.csv at the end (a row per entity).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
              help="Missing (NaN) sensor values: 'error', 'interpolate' or 'hold' [each model's setting].")
@click.option("--sensor-scores", is_flag=True, help="Also a column score_<sensor> per sensor, as detect's.")
@click.option("--events", is_flag=True,
              help="Also events/<entity>.csv, each entity's alarm list, a row appended as each anomaly ends.")
@click.option("--interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds between looks at LIVE.")
@click.option("--idle-exit", type=click.FloatRange(min=0), default=None,
              help="Stop once no entity's file has gained a complete line for this many seconds [until Ctrl-C].")
@click.option("--resume", is_flag=True,
              help="Continue an earlier fleet-watch into the same --out: each entity's scores file's rows are its "
                   "history, the rest appended (as watch --resume).")
@click.option("--new-only", is_flag=True,
              help="Score only the lines the files gain from now on: the rows they hold at the start are history.")
@click.option("--json", "as_json", is_flag=True,
              help="Each alarm, clear and summary as one JSON object a line on stdout, with its entity.")
@metrics_option
@encoding_option
@time_column_option
@time_zone_option
@na_value_option
@drop_columns_option
def fleet_watch(fleet, live, out, device, missing, sensor_scores, events, interval, idle_exit, resume, new_only,
                as_json, metrics, encoding, time_column, time_zone, na_values, drop_columns) -> None:
    """Score LIVE, a folder of one growing CSV per entity (<entity>.csv) or of one folder per entity of the files a
    logger rolls (<entity>/, followed in name order as `watch DIR` follows them), each with the model of its name in
    FLEET (the folder `mscred fleet` wrote, or a folder of model folders), as the files grow, into --out.

    Each entity as `mscred watch` scores one file: 'alarm:' and 'clear:' lines on stdout, named by entity, and
    scores/<entity>.csv written a chunk at a time. Files that appear later are taken up; a file without a model
    gets a note. An entity whose file turns bad stops with a line on stderr, the others go on (exit 1 at the end).
    Stops on Ctrl-C (or after --idle-exit seconds without a new line in any file) with a summary per entity,
    as on SIGTERM (then exit 143).
    """
    from mscred.cli.watch import stopped_by_a_person
    from mscred.errors import InputError, PartlyDone
    from mscred.fleet_detect import existing_folder, model_folders

    if resume and new_only:
        raise InputError("--resume and --new-only: give one (--resume continues the scores in --out; --new-only "
                         "starts new ones after the files' rows)")
    models = model_folders(fleet)
    live = existing_folder(live, "the entities' growing CSV files, one a file")
    if Path(out).resolve() == live.resolve() or live.resolve() in Path(out).resolve().parents:
        raise InputError(f"{out}: is inside the watched folder {live}: write it elsewhere")
    if metrics is not None:
        check_metrics_path(metrics)
    fleet_run = FleetWatch(models, live, Path(out), dict(device=device, missing=missing, sensor_scores=sensor_scores,
                                                          events=events, as_json=as_json, encoding=encoding,
                                                          time_column=time_column, time_zone=time_zone,
                                                          na_values=na_values,
                                                          drop_columns=column_names(drop_columns, "--drop-columns")
                                                          or ()),
                           "resume" if resume else "new_only" if new_only else None,
                           None if metrics is None else MetricsFile(metrics, label="entity"))
    with stopped_by_a_person() as terminated:
        try:
            fleet_run.run(interval, idle_exit)
        finally:
            fleet_run.close()
    fleet_run.write_metrics()
    stopped = fleet_run.summary()
    terminated.raise_again()   # (SIGTERM: exit 143, after the summary and summary.csv)
    if stopped:
        raise PartlyDone(f"{stopped} entities stopped")


class FleetWatch:
    """The entities' watches: started as their files appear, polled in turn, stopped one by one on bad input."""

    def __init__(self, models: dict, live: Path, out: Path, options: dict, start: Optional[str],
                 metrics: Optional[MetricsFile] = None):
        self.models, self.live, self.out, self.options, self.start = models, live, out, options, start
        self.metrics = metrics
        self.watches: dict[str, EntityWatch] = {}
        self.noted: set[str] = set()      # files without a model, said once

    def run(self, interval: float, idle_exit) -> None:
        from mscred.cli.watch import follow_until_idle

        follow_until_idle(self._poll_all, interval, idle_exit)

    def _take_up_new_files(self) -> None:
        from mscred.data.io import is_plain_text
        from mscred.fleet import safe_name

        for path in sorted(self.live.iterdir()):
            if path.name.startswith(".") or not (path.is_dir() or path.is_file() and is_plain_text(path)):
                continue
            entity = safe_name(path.name if path.is_dir() else path.stem)
            if path.name in self.noted or (entity in self.watches and self.watches[entity].path == path):
                continue
            if entity in self.watches:
                click.echo(f"note: {path}: entity {entity!r} is watched in {self.watches[entity].path.name} "
                           "already: not watched", err=True)
                self.noted.add(path.name)
                continue
            if entity not in self.models:
                click.echo(f"note: {path}: no model of entity {entity!r} in the fleet: not watched", err=True)
                self.noted.add(path.name)
                continue
            self.watches[entity] = EntityWatch(entity, path, self.models[entity], self.out, self.options, self.start)

    def _poll_all(self, final: bool) -> bool:
        """Files that appeared taken up (but at the last, ``final`` poll), then each running entity's new lines
        scored; whether any came."""
        if not final:
            self._take_up_new_files()
        gained = False
        for watch in self.watches.values():
            gained |= watch.poll(final)
        if self.metrics is not None:
            self.metrics.after_poll(self._feeds(), gained)
        return gained

    def _feeds(self) -> dict:
        """Each entity watched: its scores (None where it stopped before any) and why it stopped (or None)."""
        return {entity: (watch.scores, watch.stopped) for entity, watch in self.watches.items()}

    def write_metrics(self) -> None:
        """The metrics file's last state (with --metrics), once the watch has stopped."""
        if self.metrics is not None:
            self.metrics.write(self._feeds())

    def close(self) -> None:
        for watch in self.watches.values():
            watch.close()

    def summary(self) -> int:
        """Each entity's summary line, then the fleet's, and DIR/summary.csv (a row per entity watched: status,
        rows scored, anomalous rows, alarms, threshold); returns how many entities stopped."""
        from mscred.atomic import atomic_path
        from mscred.cli.watch import show_stop_note

        for watch in self.watches.values():
            if watch.scores is not None:
                watch.scores.summary(watch.follower.path)
                show_stop_note(watch.follower)
        table = pd.DataFrame([watch.row() for watch in self.watches.values()], columns=SUMMARY_COLUMNS)
        self.out.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.out / "summary.csv", what="fleet-watch's summary") as tmp:
            table.to_csv(tmp, index=False)
        stopped = sum(watch.stopped is not None for watch in self.watches.values())
        rows = sum(watch.scores.rows for watch in self.watches.values() if watch.scores is not None)
        alarms = sum(watch.scores.alarms for watch in self.watches.values() if watch.scores is not None)
        line = (f"fleet-watch: {len(self.watches)} entities watched, {rows} rows scored, {alarms} alarm(s)"
                f"{f', {stopped} stopped' if stopped else ''}; wrote {self.out}")
        if self.options["as_json"]:
            import json

            line = json.dumps({"event": "fleet_summary", "entities": len(self.watches), "rows": rows,
                               "alarms": alarms, "stopped": stopped, "out": str(self.out)})
        click.echo(line)
        return stopped


class EntityWatch:
    """One entity's file, monitor and scores file; ``stopped`` the reason once its file turned bad."""

    def __init__(self, entity: str, path: Path, model_dir: Path, out: Path, options: dict, start: Optional[str]):
        from mscred.cli.watch import resume_scores, take_as_history
        from mscred.cli.watch_output import Scores
        from mscred.data.follow import GrowingCsv, RollingFolder
        from mscred.data.long_feed import followed
        from mscred.data.reading import Reading
        from mscred.detector import MSCRED
        from mscred.errors import InputError

        self.entity, self.path, self.stopped = entity, path, None
        self.follower = self.scores = None
        try:   # (a file or model this entity alone cannot use stops it, not the fleet)
            rolled = path.is_dir()   # (a folder of the files a logger rolls, as `watch DIR`)
            self.follower = (RollingFolder if rolled else GrowingCsv)(path, encoding=options["encoding"])
            model = MSCRED.load(model_dir, device=options["device"])
            reading = Reading.of_model(model.config_.train, options["time_column"], options["na_values"],
                                       drop_columns=options["drop_columns"], time_zone=options["time_zone"])
            self.follower = followed(self.follower, reading, model.sensors_)   # (as watch's)
            self.monitor = model.monitor(sensor_scores=options["sensor_scores"], missing=options["missing"])
            (out / "scores").mkdir(parents=True, exist_ok=True)
            events = None
            if options["events"]:
                (out / "events").mkdir(exist_ok=True)
                events = out / "events" / f"{entity}.csv"
            self.scores = Scores(out / "scores" / f"{entity}.csv", model.threshold_, events=events,
                                 top_k=model.config_.score.top_k, as_json=options["as_json"], entity=entity)
            if start == "resume":
                resume_scores(self.follower, self.monitor, self.scores)
            elif start == "new_only":
                take_as_history(self.follower, self.monitor, self.scores)
        except InputError as err:
            self._stop(err)

    def poll(self, final: bool) -> bool:
        """The file's new lines scored (unless stopped); whether any came."""
        from mscred.cli.watch import poll_once
        from mscred.errors import InputError

        if self.stopped is not None:
            return False
        try:
            return poll_once(self.follower, self.monitor, self.scores, final)
        except InputError as err:
            self._stop(err)
            return False

    def row(self) -> dict:
        """This entity's row of DIR/summary.csv."""
        scores = self.scores
        return {"entity": self.entity, "status": "ok" if self.stopped is None else f"stopped: {self.stopped}",
                "file": str(self.path), "rows": scores.rows if scores else 0,
                "anomalous": scores.anomalous if scores else 0, "alarms": scores.alarms if scores else 0,
                "threshold": scores.threshold if scores else None}

    def _stop(self, err) -> None:
        from mscred.cli.main import one_line

        self.stopped = one_line(err)
        click.echo(f"{self.entity}: stopped: {self.stopped}", err=True)

    def close(self) -> None:
        for part in (self.follower, self.scores):
            if part is not None:
                part.close()
