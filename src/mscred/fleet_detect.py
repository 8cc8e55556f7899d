"""Score new data of every entity of a fleet with its own model, in one process (``mscred fleet-detect``).

``mscred fleet`` trains one model per entity (``OUT/models/<entity>/``). The data that comes after is a folder of
tables named as the entities (``<entity>.csv``, ``.parquet``, ``.npy``), or of folders named as them whose tables a
logger rolls (``<entity>/``: one feed, its files in name order, as `watch DIR` reads them); each is scored with the
model of its name, optionally after the rows of the same entity's previous file (``context``: every row scored, as
``detect --context``; an entity's folder there gives its last table). A folder's files are scored one after the
other, each after the one before as its context, so that its scores are those of the feed as one table. One
`mscred detect` per entity would start Python and torch again for each, seconds apiece.

The output folder holds ``scores/<entity>.csv`` (a SCORES table, as `detect` writes) per scored entity,
``summary.csv`` (a row per entity: status, rows, rows scored, anomalous rows, intervals, threshold, context rows used)
``events.csv``, the fleet's alarm list (``mscred.events``: a row per anomaly, with its entity), with ``report``
``report.html`` (``mscred.fleet_report``), and with ``entity_reports`` ``reports/<entity>/``, the detection page of
each entity that alarmed (``mscred.detection_report``, as ``detect --report`` writes it), written as a whole,
atomically.
An entity whose data is bad input gets its reason in the summary and no scores file; the others are scored.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from mscred.errors import InputError
from mscred.fleet import BAD_INPUT, TABLE_SUFFIXES, safe_name, table_files, tables_given

SUMMARY, SCORES, EVENTS, REPORT, REPORTS = "summary.csv", "scores", "events.csv", "report.html", "reports"
COLUMNS = ["entity", "status", "rows", "scored", "anomalous", "intervals", "threshold", "context_rows"]
NO_DATA = "no new data"


def existing_folder(path: str | Path, hint: str) -> Path:
    """``path`` as a Path, or an InputError saying it is not a folder or not found, with ``hint`` in brackets."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: {'not a folder' if path.exists() else 'not found'} ({hint})")
    return path


def model_folders(fleet: str | Path) -> dict[str, Path]:
    """The model folders of ``fleet`` by name: a folder `mscred fleet` wrote (its ``models/``) or a folder of model
    folders; InputError when it holds none."""
    fleet = existing_folder(fleet, "give the folder `mscred fleet --out` wrote, or a folder of model folders")
    base = fleet / "models" if (fleet / "models").is_dir() else fleet
    models = {item.name: item for item in sorted(base.iterdir())
              if item.is_dir() and not item.name.startswith(".") and (item / "config.json").is_file()}
    if not models:
        raise InputError(f"{base}: no model folder found (sub-folders with config.json and model.safetensors, as "
                         "`mscred fleet` writes under models/)")
    return models


def data_files(folder: str | Path, what: str = "data") -> dict[str, Path]:
    """The tables of ``folder`` by entity (the file name as `mscred fleet` names its models), or an entity's folder
    of tables (its name; ``fleet.tables_given`` lists them); hidden entries and folders without a table are skipped,
    and two of one entity (pump.csv and pump.parquet, or pump/) are an InputError."""
    folder = existing_folder(folder, f"the {what}: a folder of one table per entity")
    found: dict[str, Path] = {}
    for item in sorted(folder.iterdir()):
        if item.name.startswith("."):
            continue
        if item.is_dir():
            if not table_files(item):
                continue
            name = safe_name(item.name)
        elif not item.is_file() or item.suffix.lower() not in TABLE_SUFFIXES:
            continue
        else:
            name = safe_name(item.stem)
        if name in found:
            raise InputError(f"{folder}: {found[name].name} and {item.name} are both entity {name!r}'s {what}; keep "
                             "one")
        found[name] = item
    return found


def owned_names(out: Path) -> set[str]:
    """What a folder this command wrote holds, so that a new run may replace it: its summary and scores folder,
    when the summary is ours (its header); nothing otherwise."""
    try:
        with open(out / SUMMARY, encoding="utf-8") as handle:
            ours = handle.readline().strip() == ",".join(COLUMNS)
    except OSError:
        return set()
    return {SUMMARY, SCORES, EVENTS, REPORT, REPORTS} if ours else set()


def detect_fleet(fleet, data, out, context=None, *, sensor_scores: bool = False, device: str = "auto",
                 missing: Optional[str] = None, encoding: Optional[str] = None, time_column: Optional[str] = None,
                 na_values: Sequence[str] = (), long_columns: Optional[tuple[str, str]] = None,
                 drop_columns: Sequence[str] = (), time_zone: Optional[str] = None, report: bool = False,
                 entity_reports: bool = False,
                 echo: Optional[Callable[[str], None]] = None) -> pd.DataFrame:
    """Score every entity's table in ``data`` with its model of ``fleet`` (after its table in ``context``, when
    there is one) and write ``out``; returns the summary (``COLUMNS``). Entities with a model and no table are
    listed as ``no new data``; a table without a model, or bad input, as ``bad input: ...``. ``entity_reports``: the
    detection page of every entity with an alarm, in ``reports/<entity>/``. ``missing`` and ``time_column``: each
    model's own where None; ``na_values``: text read as a missing value besides each model's;
    ``long_columns`` and ``time_zone``: a long table's columns and the data's time zone instead of each model's
    (``mscred.data.reading.Reading.of_model``)."""
    from mscred.atomic import atomic_path, check_replaceable_dir
    from mscred.data.io import write_table
    from mscred.data.reading import Reading
    from mscred.detector import MSCRED
    from mscred.events import COLUMNS as EVENT_COLUMNS
    from mscred.detect import without_sensor_scores
    from mscred.events import events_table
    from mscred.feed import feed_tables, score_feed

    out = Path(out)
    check_replaceable_dir(out, owned_names(out), "mscred fleet-detect scores")
    models, tables = model_folders(fleet), data_files(data)
    before = data_files(context, "context") if context is not None else {}
    if not tables:
        raise InputError(f"{data}: no table found (CSV, Parquet or .npy files named as the entities)")
    rows, alarms, pages = [], [], []
    if report:
        from mscred.fleet_report import MostAnomalous, write_fleet_report

        plots = MostAnomalous()
    with atomic_path(out, owned=owned_names(out), what="mscred fleet-detect scores") as tmp:
        (tmp / SCORES).mkdir(parents=True)
        if entity_reports:
            from mscred.detection_report import feed_report   # (its pages only: the figures' modules)

            (tmp / REPORTS).mkdir()
        for name in sorted(set(models) | set(tables)):
            row = dict.fromkeys(COLUMNS)
            row.update(entity=name)
            if name not in tables:
                row["status"] = NO_DATA
            elif name not in models:
                row["status"] = f"{BAD_INPUT}{tables[name]}: no model named {name!r} in {fleet}"
            else:
                try:
                    model = MSCRED.load(models[name], device=device)
                    read_options = dict(missing=missing or model.config_.train.missing, ignore_label=True,
                                        encoding=encoding, reading=Reading.of_model(model.config_.train, time_column,
                                                                                    na_values, long_columns,
                                                                                    drop_columns, time_zone))
                    ctx, tables_of = feed_tables(tables_given(tables[name], "to score"),   # (a folder's: one feed)
                                                 tables_given(before[name], "as context")[-1]
                                                 if name in before else None, **read_options)
                    # (an entity's page draws each sensor's score: computed for it, written only if asked for)
                    feed = score_feed(model, tables_of, ctx, sensor_scores=sensor_scores or entity_reports)
                    frame = feed.frame
                    found = events_table(frame, top_k=model.config_.score.top_k)
                    if entity_reports and len(found):
                        feed_report(tmp / REPORTS / safe_name(name), frame, feed.tables, model, models[name],
                                    str(tables[name]), feed.scored(model))
                        pages.append(name)
                    if not sensor_scores:
                        frame = without_sensor_scores(frame)
                except InputError as err:   # the entity's data or model: its row says what and where
                    row["status"] = BAD_INPUT + str(err)
                except Exception as err:  # noqa: BLE001 - one entity must not stop the fleet (as fleet's rows)
                    row["status"] = f"error: {type(err).__name__}: {err}"
                else:
                    write_table(frame, tmp / SCORES / f"{name}.csv")
                    if len(found):   # (concatenating empty frames is deprecated in pandas)
                        alarms.append(found.assign(entity=name))
                    if report:
                        plots.offer(name, frame, float(model.threshold_))
                    row.update(status="ok", rows=len(frame), context_rows=feed.context_rows,
                               scored=feed.scored(model),
                               anomalous=int(frame["is_anomaly"].sum()), intervals=len(found),
                               threshold=float(model.threshold_))
            rows.append(row)
            if echo is not None:
                echo(f"{name}: {row['status']}")
        summary = pd.DataFrame(rows, columns=COLUMNS)
        for column in ("rows", "scored", "anomalous", "intervals", "context_rows"):
            summary[column] = summary[column].astype("Int64")
        summary.to_csv(tmp / SUMMARY, index=False)
        alarms = pd.concat(alarms, ignore_index=True) if alarms else pd.DataFrame(columns=["entity"] + EVENT_COLUMNS)
        alarms = alarms[["entity"] + EVENT_COLUMNS]
        alarms.to_csv(tmp / EVENTS, index=False)
        if report:
            write_fleet_report(tmp / REPORT, summary, alarms, plots, source=f"models {fleet}, data {data}",
                               pages={name: f"{REPORTS}/{safe_name(name)}/index.html" for name in pages})
    return summary


def failed(summary: pd.DataFrame) -> np.ndarray:
    """The entities that had data and were not scored."""
    return ~summary["status"].isin(["ok", NO_DATA]).to_numpy()
