"""Fleet mode: one MSCRED model per entity (machine, channel, table), entities spread over ranks, one summary.

Sources (``discover``):

* ``smd`` / ``smd:m1,m2`` with ``root`` the SMD folder: every machine of ``root/train/*.txt`` (or those named);
  ``smap`` / ``msl`` likewise, every channel of that spacecraft in ``labeled_anomalies.csv`` with its arrays.
* a folder of sub-folders, each a labelled ``table`` dataset (``train.*`` + ``test.*`` with a ``label`` column, the
  layout ``mscred generate`` writes): one entity per sub-folder, evaluated on its test part.
* a folder of CSV/Parquet/.npy files, one entity per file: normal data to train on, no evaluation (a file with a
  ``label`` column is split as the ``table`` dataset does: first half trains, second half is evaluated).
* in such a folder, a sub-folder of tables without a train/test pair (a logger's rolled files, runs between plant
  stops): one entity of ``parts`` trained as ``mscred train`` trains several DATA files -- every window of every
  part, none across two.

Entities go to ranks by longest-processing-time first on their training file's size (deterministic), each rank
trains its share one entity after the other on its own device (``cuda:<local rank>``), and writes per entity the
model directory ``OUT/models/<entity>`` and a JSON row ``OUT/rows/<entity>.json``. Rank 0 then writes
``OUT/summary.csv`` and ``OUT/summary.md``. An entity that fails gets a row with its error; the others go on.
With ``resume``, entities whose row says ``ok`` and whose model exists, trained on the same data with the same
settings, are not trained again. Hidden entries of a folder ('.*') are not entities; ``OUT`` is new or a fleet's.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from mscred.atomic import atomic_path
from mscred.config import RUNTIME_SETTINGS, MSCREDConfig, TrainConfig
from mscred.data.reading import Reading, settings_reading
from mscred.errors import InputError, note_lines

MULTI_ENTITY_DATASETS = ("smd", "smap", "msl")
_COUNT_COLUMNS = ("rank", "rows", "sensors", "windows", "epochs", "events_found", "events_total")
TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".npy")
_BINARY_SUFFIXES = (".parquet", ".pq", ".npy")   # tables without a text encoding (any other is read as text)
# The status of an entity whose data was bad input (else "ok", or "error: <type>: <message>" for any other failure).
BAD_INPUT = "bad input: "
# The status of an entity without a row: the run (or its rank) stopped before it.
NOT_RUN = "not trained: the run stopped before it"
COLUMNS = ["entity", "rank", "status", "rows", "sensors", "windows", "epochs", "train_loss", "val_loss", "threshold",
           "seconds", "precision", "recall", "f1", "events_found", "events_total", "auc_roc", "auc_pr", "model"]


@dataclass(frozen=True)
class Entity:
    """One model to train: ``kind`` "dataset" (``load_dataset(spec, root)``), "file" (``spec`` a table path) or
    "parts" (``spec`` a folder whose tables, in name order, are the parts of its training data)."""

    name: str
    kind: str
    spec: str
    root: Optional[str]
    size: int  # bytes of its training data, the load-balancing weight


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def discover(source: str, root: Optional[str] = None) -> list[Entity]:
    """The entities of ``source`` (see the module docstring), sorted by name; InputError when there are none."""
    path = Path(source)
    # The rule, unambiguous: a source whose name (before any ':') is a fleet dataset's IS that dataset, even when a
    # folder of that name lies in the current directory (a user's SMD copy is often called ./smd and is the very
    # --data-root); that folder, as a folder fleet, is spelled with a path ("./smd"). Looking at the disk first
    # made "mscred fleet smd --data-root smd" read ./smd as tables and silently ignore --data-root.
    if is_dataset_source(source):
        entities = _dataset_entities(source, root)
    elif root is not None:
        # --data-root only means something for a dataset name; ignoring it would hide a typo in the name.
        raise InputError(f"{source}: --data-root {root} is for a fleet dataset ({', '.join(MULTI_ENTITY_DATASETS)}"
                         f"[:names]); a folder fleet is given as SOURCE alone")
    elif path.is_dir():
        entities = _folder_entities(path)
    elif path.exists():
        raise InputError(f"{source}: a fleet is a folder (one table or sub-folder per entity) or a dataset name "
                         f"({', '.join(MULTI_ENTITY_DATASETS)}), not one file")
    else:
        entities = _dataset_entities(source, root)
    # Names that differ but share a file name ("pump 1" and "pump_1") would write one model folder and one row
    # file, the second overwriting the first: refused like equal names.
    by_file: dict[str, list[Entity]] = {}
    for e in entities:
        by_file.setdefault(safe_name(e.name), []).append(e)
    clashes = sorted(" / ".join(sorted(_clash_labels(group))) for group in by_file.values() if len(group) > 1)
    if clashes:
        raise InputError(f"{source}: several entities would be written under one name ({'; '.join(clashes)}): "
                         "rename them")
    return sorted(entities, key=lambda e: e.name)


def is_dataset_source(source: str) -> bool:
    """Whether ``source`` names a fleet dataset (``smd``, ``smap:A-1,A-2``, ...) rather than a folder."""
    return str(source).partition(":")[0].strip().lower() in MULTI_ENTITY_DATASETS


def _clash_labels(group: list[Entity]) -> list[str]:
    """How to tell the entities of one clash apart: their names, or where those are equal ("x.csv" beside
    "x.parquet", a sub-folder "x" beside "x.csv") their files, since "x / x" says nothing to rename."""
    if len({e.name for e in group}) == len(group):
        return [e.name for e in group]
    return [Path(e.spec).name if e.kind == "file" else f"{Path(e.spec).name}/" if e.kind == "parts"
            else f"{Path(e.root).name}/" if e.spec == "table" else e.spec for e in group]


def _part(folder: Path, stem: str) -> Optional[Path]:
    """``folder/<stem>.csv`` (or .parquet/.pq/.npy), the first that exists, or None."""
    return next((folder / f"{stem}{s}" for s in TABLE_SUFFIXES if (folder / f"{stem}{s}").is_file()), None)


def _folder_entities(folder: Path) -> list[Entity]:
    entities = []
    for item in sorted(folder.iterdir()):
        # Hidden entries are not the user's entities: .git/, editors' and macOS's copies (._pump.csv, the
        # AppleDouble file beside every table copied from a Mac) were trained, or failed, as entities.
        if item.name.startswith("."):
            continue
        if item.is_dir():
            train, test = _part(item, "train"), _part(item, "test")
            # A sub-folder with only one of its two parts is an entity whose row says what is missing; dropped
            # without a word, the summary read "1 of 1 entities trained" for a fleet of two.
            if train is not None or test is not None:
                entities.append(Entity(item.name, "dataset", "table", str(item), _size(train or test)))
            elif parts := table_files(item):   # (a folder of neither was dropped without a word)
                entities.append(Entity(item.name, "parts", str(item), None, sum(map(_size, parts))))
        elif item.suffix.lower() in TABLE_SUFFIXES:
            entities.append(Entity(item.stem, "file", str(item), None, _size(item)))
    if not entities:
        raise InputError(f"{folder}: no entity found (expected CSV/Parquet/.npy files, or sub-folders with "
                         f"train.csv and test.csv, or of an entity's tables)")
    return entities


def table_files(folder: Path) -> list[Path]:
    """The tables of ``folder`` (a ``parts`` entity's; fleet-detect's entity folder), in name order: hidden files
    and other types are not its."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in TABLE_SUFFIXES)


def tables_given(path: str | Path, purpose: str) -> list[Path]:
    """A DATA argument's tables: ``path`` itself, or a folder's ``table_files`` (a logger's rolled files: parts to
    train on, a feed to score); a folder without one is bad input, named, with ``purpose`` ("to train on")."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    found = table_files(path)
    if not found:
        raise InputError(f"{path}: a folder without a table ({', '.join(TABLE_SUFFIXES)} files) {purpose}")
    return found


def _dataset_entities(source: str, root: Optional[str]) -> list[Entity]:
    kind, _, items = source.partition(":")
    kind = kind.strip().lower()
    if kind not in MULTI_ENTITY_DATASETS:
        raise InputError(f"{source}: neither a folder nor a fleet dataset ({', '.join(MULTI_ENTITY_DATASETS)})")
    if root is None:
        raise InputError(f"fleet dataset {kind!r} needs its folder: --data-root DIR")
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"{root}: not found")
    data, table = _dataset_layout(kind, base)
    suffix = ".txt" if kind == "smd" else ".npy"
    named = list(dict.fromkeys(i.strip() for i in items.split(",") if i.strip()))  # "smd:m1,m1" is m1 once
    if not named:
        if kind == "smd":
            named = sorted(p.stem for p in (data / "train").glob("*.txt"))
        else:
            named = _telemanom_channels(base, data, table, kind)
        if not named:
            raise InputError(f"{data / 'train'}: no {kind.upper()} entity found")
    return [Entity(name, "dataset", f"{kind}:{name}", str(base), _size(data / "train" / f"{name}{suffix}"))
            for name in named]


def _dataset_layout(kind: str, root: Path) -> tuple[Path, Optional[Path]]:
    """(the folder of the dataset's train/ and test/, SMAP/MSL's labels table) under ``--data-root``, found as the
    loaders find them (``datasets.smd_folder``, ``datasets.telemanom_layout``: a GitHub checkout above the SMD
    folder, the Kaggle copy's ``data/data/``), so that every dataset ``load_dataset`` reads is a fleet too (those
    layouts were "no SMD entity found")."""
    from mscred.data.datasets import smd_folder, telemanom_layout

    if kind == "smd":
        return smd_folder(root), None
    return telemanom_layout(root)


def _telemanom_channels(base: Path, data: Path, table_path: Path, kind: str) -> list[str]:
    if not table_path.is_file():
        raise InputError(f"{base}: labeled_anomalies.csv not found")
    try:  # guarded as datasets._load_telemanom reads it: a damaged table is bad input naming it, not a crash
        table = pd.read_csv(table_path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise InputError(f"{table_path}: cannot read: {' '.join(str(exc).split())}") from None
    if not {"chan_id", "spacecraft"} <= set(table.columns):
        raise InputError(f"{table_path}: expected columns chan_id and spacecraft")
    # (stripped, as the loader reads them: " SMAP" or "P-1 " of a hand-edited table)
    ours = table[table["spacecraft"].astype(str).str.strip().str.upper() == kind.upper()]["chan_id"]
    return sorted(dict.fromkeys(c for c in ours.astype(str).str.strip() if (data / "test" / f"{c}.npy").is_file()))


def assign(entities: list[Entity], world_size: int) -> list[list[Entity]]:
    """Longest-processing-time first: biggest entity to the least loaded rank (ties: lower rank); deterministic."""
    shares: list[list[Entity]] = [[] for _ in range(world_size)]
    load = [0] * world_size
    for entity in sorted(entities, key=lambda e: (-e.size, e.name)):
        r = min(range(world_size), key=lambda k: (load[k], k))
        shares[r].append(entity)
        load[r] += max(entity.size, 1)
    return shares


def safe_name(name: str) -> str:
    """An entity name as a file name (path separators and odd characters become '_')."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


# ---------------------------------------------------------------------------------------------------- one entity
def _load(entity: Entity, missing: str = "error", encoding: Optional[str] = None, reading: Optional[Reading] = None
          ) -> tuple[Any, Optional[pd.DataFrame]]:
    """(training data, labelled test frame or None); ``missing``, ``encoding`` and ``reading`` (the tables'; the
    public datasets' files have their own) as ``load_table``'s."""
    from mscred.data.datasets import load_dataset
    from mscred.data.io import load_table

    if entity.kind == "dataset":
        ds = load_dataset(entity.spec, entity.root, missing=missing, encoding=encoding)
        return ds.train, ds.test
    if entity.kind == "parts":   # (labels in a part are not split off: parts are normal data, as train's DATA)
        parts = [load_table(p, missing=missing, encoding=encoding, reading=reading)
                 for p in table_files(Path(entity.spec))]
        return (parts if len(parts) > 1 else parts[0]), None
    table = load_table(entity.spec, missing=missing, encoding=encoding, reading=reading)
    if table.labels is None:
        return table, None
    ds = load_dataset("table", entity.spec, missing=missing, encoding=encoding, reading=reading)
    return ds.train, ds.test


def evaluate(labels: np.ndarray, scores: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    """Point P/R/F1, events found, AUC-ROC and AUC-PR (None where undefined) with ``mscred.metrics``."""
    from mscred import metrics as M

    point = M.point_prf(labels, pred)
    found, total = M.event_recall(labels, pred)
    both = 0 < int(labels.sum()) < labels.size
    return {"precision": point.precision, "recall": point.recall, "f1": point.f1, "events_found": found,
            "events_total": total, "auc_roc": M.auc_roc(labels, scores) if both else None,
            "auc_pr": M.auc_pr(labels, scores) if both else None}


def train_entity(entity: Entity, out: Path, overrides: dict[str, Any], rank: int = 0,
                 encoding: Optional[str] = None) -> dict[str, Any]:
    """Train, save and (with labels) evaluate one entity; returns its summary row (errors become its status).
    ``encoding``: the text encoding of its CSV files, as ``load_table``'s."""
    from mscred.detector import MSCRED
    from mscred.signature import segment_ends

    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(entity=entity.name, rank=rank)
    start = time.perf_counter()
    try:
        missing = overrides.get("missing", TrainConfig.missing)
        train, test = _load(entity, missing, encoding, settings_reading(overrides))   # (a missing file: bad input)
        row["data_sha256"] = data_fingerprint(entity)   # (the row file keeps it; the summary shows COLUMNS)
        # (the same bytes read in another encoding are other sensor names: --resume trains again)
        row["encoding"] = encoding if _reads_text(entity) else None
        model = MSCRED(**overrides)
        with note_lines():   # one "note:" line, as train gives it
            model.fit(train)
        model.save(out / "models" / safe_name(entity.name))
        sig = model.config_.signature
        # a frame or a loaded Table, or a list of parts (each one's windows, none across two)
        lengths = [len(t) if isinstance(t, pd.DataFrame) else len(t.values)
                   for t in (train if isinstance(train, list) else [train])]
        last = model.history_[-1]
        row.update(rows=sum(lengths), sensors=len(model.sensors_),
                   windows=sum(max(len(segment_ends(n, sig.windows, sig.gap)) - sig.steps + 1, 0) for n in lengths),
                   epochs=len(model.history_), train_loss=last["train_loss"], val_loss=last["val_loss"],
                   threshold=float(model.threshold_))
        if test is not None:
            labels = test["label"].to_numpy().astype(np.int64)
            scores = model.decision_function(test)
            row.update(evaluate(labels, scores, (scores > model.threshold_).astype(np.int64)))
        row["status"] = "ok"
    except InputError as err:  # the entity's data: its row says what and where, as the CLI would
        row["status"] = f"{BAD_INPUT}{err}"
    except Exception as err:  # noqa: BLE001 - one bad entity must not stop the fleet; its row says why
        row["status"] = f"error: {type(err).__name__}: {err}"
    row["seconds"] = time.perf_counter() - start
    return row


def _plain(value):
    """NumPy scalars to Python numbers, NaN/inf to None (JSON has no NaN)."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def _data_files(entity: Entity) -> list[Path]:
    """The files an entity's data is read from: its table; a table dataset's folder; for smd / smap / msl the
    files named after the machine or channel below the dataset folder and the SMAP/MSL labels table."""
    if entity.kind == "file":
        return [Path(entity.spec)]
    if entity.kind == "parts":
        return table_files(Path(entity.spec))
    root = Path(entity.root)
    if entity.spec == "table":
        return sorted(p for p in root.iterdir() if p.is_file())
    kind, _, name = entity.spec.partition(":")
    # The layout's own files, not every "<name>.*" below the root: an --out inside --data-root holds
    # rows/<name>.json, rewritten by every run, so --resume retrained every entity, every time.
    data, table = _dataset_layout(kind, root)
    if kind == "smd":
        files = [data / part / f"{name}.txt" for part in ("train", "test", "test_label", "interpretation_label")]
    else:
        files = [data / part / f"{name}.npy" for part in ("train", "test")] + [table]
    return sorted(p for p in files if p.is_file())


def data_fingerprint(entity: Entity) -> str:
    """SHA-256 over the names and contents of ``_data_files(entity)``: what ``--resume`` compares, so that a model
    of data since changed is trained again (a file's time alone would retrain after a mere copy, and miss an edit
    that kept it)."""
    digest = hashlib.sha256()
    for path in _data_files(entity):
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _reads_text(entity: Entity) -> bool:
    """Whether ``--encoding`` reaches the entity's data: a CSV table; a table sub-folder with a CSV part or an
    anomalies.csv. SMD's .txt, SMAP/MSL's arrays and labels table (read in their publishers' format) and Parquet and
    .npy tables are read the same whatever it says: fingerprinting it there retrained them all under --resume when
    the option changed, for one CSV entity among them or none."""
    if entity.kind == "file":
        return Path(entity.spec).suffix.lower() not in _BINARY_SUFFIXES
    if entity.kind == "parts":
        return any(p.suffix.lower() not in _BINARY_SUFFIXES for p in table_files(Path(entity.spec)))
    if entity.spec != "table":
        return False   # smd / smap / msl
    root = Path(entity.root)
    parts = [_part(root, "train"), _part(root, "test"), root / "anomalies.csv"]
    return any(p is not None and p.is_file() and p.suffix.lower() not in _BINARY_SUFFIXES for p in parts)


def _encoding_read(entity: Entity, encoding: Optional[str]) -> Optional[str]:
    """The codec ``encoding`` reads the entity's text with (``csv_encoding``: None and "utf-8" are one, "CP1252" and
    "cp1252" too), or None where the entity reads none (``_reads_text``): what ``--resume`` compares."""
    from mscred.data.io import csv_encoding

    return csv_encoding(encoding) if _reads_text(entity) else None


def _row_path(out: Path, entity: Entity) -> Path:
    return out / "rows" / f"{safe_name(entity.name)}.json"




def _done(out: Path, entity: Entity, overrides: dict[str, Any], encoding: Optional[str] = None) -> bool:
    """Whether ``--resume`` may skip the entity: its row says ok, its data is what that row was trained on (once an
    edited table kept its old model, reported "ok"), and its model was trained with these settings (once a rerun
    with other epochs or seed kept the old models and reported them as the new run's)."""
    from mscred.detector import CONFIG_FILE, MSCRED

    path, model = _row_path(out, entity), out / "models" / safe_name(entity.name)
    try:
        row = json.loads(path.read_text()) if path.is_file() else {}
        if row.get("status") != "ok" or row.get("data_sha256") != data_fingerprint(entity):
            return False   # failed, or trained on data that has changed since (or before rows recorded it)
        # (a row from before --encoding has none: UTF-8, None as now; a row of an SMD machine trained with
        # --encoding cp1252 holds it, and is kept without)
        if _encoding_read(entity, row.get("encoding")) != _encoding_read(entity, encoding):
            return False
        # (read as a config, so that a setting newer than the model -- train.time_column -- is its default, not a
        # difference that retrains every entity)
        saved = json.loads(json.dumps(MSCREDConfig.from_dict(json.loads((model / CONFIG_FILE).read_text())["config"])
                                      .to_dict()))
    except (ValueError, OSError, KeyError, TypeError, AttributeError):
        return False   # (ValueError: also the InputError of an encoding in the row that this Python does not know)
    wanted = json.loads(json.dumps(MSCRED(**overrides).resolved_config().to_dict()))  # tuples as JSON has them: lists
    return all(saved.get(section, {}).get(key) == value
               for section, values in wanted.items() for key, value in values.items()
               if key not in RUNTIME_SETTINGS.get(section, ()))


def _forget(out: Path, entity: Entity) -> None:
    """Remove the entity's row and model of an earlier run before it is trained again. The model is saved before
    the test part is scored and the row written: a run stopped in between (Ctrl-C, SIGTERM) left the new model
    under the old "ok" row, and the next --resume skipped it, reporting the old model's threshold and scores for
    the new one; and an entity that now fails kept the old model beside its error row."""
    import shutil

    from mscred.detector import MODEL_FILES

    _row_path(out, entity).unlink(missing_ok=True)
    model = out / "models" / safe_name(entity.name)
    if model.is_dir() and not model.is_symlink() and all(p.name in MODEL_FILES for p in model.iterdir()):
        shutil.rmtree(model)


def run_share(entities: list[Entity], out: Path, overrides: dict[str, Any], rank: int = 0, resume: bool = False,
              echo=None, encoding: Optional[str] = None) -> None:
    """Train this rank's entities one after the other, writing each row as soon as it is done; ``encoding``: that
    of their CSV files."""
    (out / "rows").mkdir(parents=True, exist_ok=True)
    for entity in entities:
        if resume and _done(out, entity, overrides, encoding):
            continue
        _forget(out, entity)
        try:
            row = train_entity(entity, out, overrides, rank, encoding)
        except BaseException:   # stopped: no model without its row (it is NOT_RUN in the summary)
            _forget(out, entity)
            raise
        with atomic_path(_row_path(out, entity)) as tmp:
            tmp.write_text(json.dumps({k: _plain(v) for k, v in row.items()}) + "\n")
        if echo is not None:
            echo(f"[rank {rank}] {entity.name}: {row['status']}, {row['epochs'] or 0} epoch(s), "
                 f"{row['seconds']:.1f} s")


def check_out(out: Path, entities: list[Entity]) -> None:
    """InputError, before any training, unless ``out`` can take the fleet's output without touching the user's
    files: it is new, or an earlier run's (resumed or redone; the user's files beside its entries are not touched),
    and no entity's model folder holds anything but a model. A folder of other files was written into: its own
    summary.csv replaced, and an entity whose model folder held a user's file failed only after its training."""
    from mscred.atomic import check_folders_above, check_replaceable_dir, few_names
    from mscred.detector import MODEL_FILES

    check_folders_above(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder; a fleet writes a folder there")
    entries = [p.name for p in out.iterdir()]
    # rows/ is the first thing a fleet writes: without it, a summary.csv or models/ there is the user's own. With a
    # fleet's rows/ the folder is an earlier run's, and what the user added beside (`evaluate --report OUT/report`)
    # is left alone: a fleet writes only its own entries (it had refused the folder it had made).
    foreign = [] if _fleet_rows(out / "rows") else sorted(entries)
    if foreign:
        raise InputError(f"--out {out}: the folder holds files that are not a fleet's output ({few_names(foreign)}); "
                         "a fleet writes models/, rows/, summary.csv and summary.md there: give a new or empty folder")
    for entity in entities:
        check_replaceable_dir(out / "models" / safe_name(entity.name), MODEL_FILES, "an mscred model")


def _fleet_rows(rows: Path) -> bool:
    """Whether ``rows`` is a fleet's rows/ folder: one entity's ``.json`` row per file (or an atomic write's leftover
    of one), nothing else."""
    if not rows.is_dir() or rows.is_symlink():
        return False
    return all(p.is_file() and (p.suffix == ".json" or (p.name.startswith(".") and p.name.endswith(".tmp")))
               for p in rows.iterdir())


def summarise(entities: list[Entity], out: Path) -> pd.DataFrame:
    """Collect the rows of ``entities`` into ``OUT/summary.csv`` and ``OUT/summary.md`` (atomically)."""
    rows = []
    for entity in entities:
        path = _row_path(out, entity)
        rows.append(json.loads(path.read_text()) if path.is_file() else {"entity": entity.name, "status": NOT_RUN})
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    # Where each trained entity's model is, relative to OUT: its folder is the entity's file name (safe_name), which
    # differs from the entity's name when that holds spaces or other characters ("pump 1" -> models/pump_1).
    frame["model"] = [f"models/{safe_name(e.name)}" if status == "ok" else None
                      for e, status in zip(entities, frame["status"])]
    for column in _COUNT_COLUMNS:   # counts stay integers beside a failed entity's empty cells (not 400.0)
        frame[column] = frame[column].astype("Int64")
    with atomic_path(out / "summary.csv") as tmp:
        frame.to_csv(tmp, index=False)
    with atomic_path(out / "summary.md") as tmp:
        tmp.write_text(markdown(frame))
    return frame


def markdown(frame: pd.DataFrame) -> str:
    """The summary as a markdown table (numbers to 4 significant digits, empty cells for None)."""
    def cell(value) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
            return ""
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value).replace("|", "/")

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.astype(object).itertuples(index=False)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- all ranks
def run_fleet(source: str, out, overrides: Optional[dict[str, Any]] = None, *, root: Optional[str] = None,
              nproc: int = 1, resume: bool = False, echo=None, timeout: Optional[float] = None,
              encoding: Optional[str] = None) -> Optional[pd.DataFrame]:
    """Train one model per entity of ``source`` over ``nproc`` ranks (or torchrun's), and summarise.

    Parameters
    ----------
    source : dataset name (``smd``, ``smd:m1,m2``, ``smap``, ``msl``) or folder (see the module docstring)
    out : output folder (``models/``, ``rows/``, ``summary.csv``, ``summary.md``)
    overrides : MSCRED settings by name (``epochs``, ``batch_size``, ``device``, ...)
    root : the dataset's folder for a dataset ``source``
    nproc : processes; on CUDA one GPU each. 1: in this process.
    echo : callable(str) for one line per finished entity, or None
    encoding : text encoding of the entities' CSV files (``load_table``'s; None: UTF-8, a BOM allowed)

    Returns
    -------
    The summary (DataFrame, one row per entity in name order, columns ``COLUMNS``) on rank 0; None on the other
    ranks of a torchrun launch.
    """
    from mscred.data.io import csv_encoding
    from mscred.launch import launch, rank_device, setup, teardown, under_torchrun

    csv_encoding(encoding)   # (an unknown name is the caller's one mistake, not every entity's bad input)
    entities = discover(source, root)
    out = Path(out)
    if not is_dataset_source(source) and Path(source).is_dir() and out.resolve() == Path(source).resolve():
        raise InputError(f"--out {out}: is the fleet's own folder {source}; its summary would be read as an "
                         "entity by the next run: write into another folder")
    check_out(out, entities)
    overrides = {**(overrides or {}), "progress": False}  # several ranks' bars would interleave
    device = overrides.get("device", "auto")
    if under_torchrun():
        rank = setup(device, backend="gloo")  # the ranks only meet at the final barrier: gloo is enough
        try:
            _fleet_rank(rank, entities, str(out), overrides, resume, echo is not None, encoding)
            import torch.distributed as dist

            dist.barrier()
            return summarise(entities, out) if rank.is_main else None
        finally:
            teardown()
    try:
        if nproc == 1:
            dev = rank_device(device, 0)
            overrides = {**overrides, "device": dev.type}
            run_share(entities, out, overrides, 0, resume, echo, encoding)
        else:
            launch(_fleet_rank, nproc, (entities, str(out), overrides, resume, echo is not None, encoding),
                   device=device, backend="gloo", timeout=timeout)
    except BaseException:
        # Stopped (Ctrl-C, SIGTERM, a rank's failure): the summary of an earlier run in OUT no longer described
        # rows/ and models/, where entities had been trained again since. Summarised from the rows there are (each
        # one that of the model beside it), the others NOT_RUN; the stop itself goes on.
        if (out / "rows").is_dir():
            with contextlib.suppress(Exception):
                summarise(entities, out)
        raise
    return summarise(entities, out)


def _fleet_rank(rank, entities: list[Entity], out: str, overrides: dict[str, Any], resume: bool,
                verbose: bool, encoding: Optional[str] = None) -> None:
    import sys

    share = assign(entities, rank.world_size)[rank.rank]
    overrides = {**overrides, "device": rank.device.type}  # "cuda" = this rank's GPU (setup made it current)
    echo = (lambda line: print(line, file=sys.stderr, flush=True)) if verbose else None
    run_share(share, Path(out), overrides, rank.rank, resume, echo, encoding)


__all__ = ["COLUMNS", "Entity", "assign", "discover", "evaluate", "markdown", "run_fleet", "run_share", "summarise",
           "train_entity"]
