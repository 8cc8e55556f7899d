"""Loaders for the public dataset layouts users hold, all returning one :class:`LabeledDataset`.

Names (``load_dataset(name, root)``):

- ``synthetic``: the paper's synthetic data (:mod:`mscred.data.synthetic`), generated, no files needed.
- ``smd:<machine>``: the Server Machine Dataset (OmniAnomaly) under ``root``: ``train/<machine>.txt``,
  ``test/<machine>.txt``, ``test_label/<machine>.txt`` and, when present, ``interpretation_label/<machine>.txt``
  with the root-cause dimensions of each anomaly. Sensors are named ``dim_01 .. dim_38`` (the 1-based dimension
  numbers of the interpretation labels).
- ``smap:<channel>`` / ``msl:<channel>``: NASA SMAP/MSL telemetry (telemanom layout) under ``root``: ``train/<chan>.npy``,
  ``test/<chan>.npy`` (also accepted under ``root/data/``) and ``labeled_anomalies.csv`` (columns ``chan_id``,
  ``spacecraft``, ``anomaly_sequences`` as ``[[start, end], ...]``, 0-based inclusive; sequences of a channel that
  overlap or touch are one event). Column 0 is the telemetry value (``telemetry``), the others the one-hot commands
  (``command_01 ..``; a bool array reads as 0/1).
- ``table``: a generic CSV/Parquet with a ``label`` column, ``root`` being either a directory with ``train.*`` and
  ``test.*`` (and optionally ``anomalies.csv``, the layout ``mscred generate`` writes) or one labelled file, whose
  first ``TABLE_TRAIN_FRACTION`` of rows becomes the training part.
- ``daphnet``: real multivariate sensor data from a package registry: the Daphnet freezing-of-gait recording
  S06R02E0 (9 accelerometer channels, 7,040 steps) shipped inside the ``aeon`` wheel (``pip install
  'mscred[datasets]'``; read straight from the installed files, aeon is never imported, nothing is downloaded).
  CAVEAT: this excerpt contains NO labelled anomaly (aeon 1.6 deprecates it for that reason), so every alarm on it
  is a false alarm; it measures false alarms on real data, not recall.
- ``tep[:<fault>]``: the Tennessee Eastman process benchmark (Downs & Vogel 1993; the Braatz data set), 52
  variables (41 measurements ``xmeas_01 ..``, 11 manipulated variables ``xmv_01 ..``) sampled every 3 minutes,
  shipped inside the ``bibmon`` wheel (``pip install 'mscred[datasets]'``; read straight from its files, bibmon is
  never imported). It is a SIMULATED chemical plant, not recorded data, labelled by construction: the test run
  ``d<fault>_te.dat`` (960 rows, faults 1-21, default 1) is normal for its first ``TEP_FAULT_START`` = 160 rows (8
  hours) and faulty from then on. Training: the two fault-free runs ``d00.dat`` (500 rows) and ``d00_te.dat`` (960
  rows), one after the other (a single seam at row 500; ``d00.dat`` alone is too short for the 60-step windows).
  No package on PyPI was found that ships a *recorded* (real), labelled, multivariate anomaly dataset inside its
  wheel or sdist (README, "Evaluation you can trust", lists what was checked).

``root`` may be one level too high or too low, as mirrors ship these: the folder holding ``ServerMachineDataset/``
(a GitHub checkout) or the ``data/data/`` of the Kaggle SMAP/MSL copy is searched one or two levels down, and a
``train/`` or ``test/`` folder stands for the folder above it (:func:`smd_folder`, :func:`telemanom_layout`).

Every layout problem raises :class:`~mscred.errors.InputError` with one line naming the file (and row) at fault.
"""
from __future__ import annotations

import ast
import csv
import difflib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from mscred.atomic import atomic_path
from mscred.data.io import (LABEL, TIMESTAMP, coerce_float64, float_read_options, load_table, short_repr,
                            table_from_frame)
from mscred.data.reading import Reading
from mscred.errors import InputError

__all__ = ["DATASETS", "LabeledDataset", "load_dataset", "intervals_from_labels", "smd_folder",
           "telemanom_layout"]

DATASETS = ("synthetic", "smd", "smap", "msl", "table", "daphnet", "tep")
TABLE_TRAIN_FRACTION = 0.5
DAPHNET_TRAIN_FRACTION = 0.5
# Tennessee Eastman test runs: the fault is switched on after 8 simulated hours = 160 samples of 3 minutes.
TEP_FAULT_START = 160
TEP_FAULTS = tuple(range(1, 22))
ANOMALY_COLUMNS = ["start", "end", "root_causes", "duration"]
_TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".npy")


@dataclass
class LabeledDataset:
    """A train/test pair with ground truth.

    Attributes
    ----------
    name : str
    train : pd.DataFrame
        ``timestamp`` column and one column per sensor.
    test : pd.DataFrame
        ``timestamp``, the same sensors, and ``label`` (0/1).
    anomalies : pd.DataFrame or None
        One row per labelled anomaly of the test part: ``start``, ``end`` (test timestamps, end exclusive),
        ``root_causes`` (``;``-joined sensor names, empty when unknown), ``duration``.
    description : str
        Where the data came from and any caveat.
    """

    name: str
    train: pd.DataFrame
    test: pd.DataFrame
    anomalies: Optional[pd.DataFrame] = None
    description: str = ""

    @property
    def sensors(self) -> list[str]:
        return [c for c in self.train.columns if c not in (TIMESTAMP, LABEL)]

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write ``train.csv``, ``test.csv`` and ``anomalies.csv`` (each atomically) for the CLI; returns out_dir."""
        out_dir = Path(out_dir)
        frames = [("train.csv", self.train), ("test.csv", self.test)]
        if self.anomalies is not None:
            frames.append(("anomalies.csv", self.anomalies))
        for name, frame in frames:
            with atomic_path(out_dir / name) as tmp:
                frame.to_csv(tmp, index=False)
        return out_dir


def load_dataset(name: str, root: str | os.PathLike | None = None, missing: str = "error",
                 encoding: Optional[str] = None, reading: Optional[Reading] = None) -> LabeledDataset:
    """Load a dataset by name (see the module docstring for names and layouts).

    Parameters
    ----------
    name : str
        ``synthetic``, ``smd:<machine>``, ``smap:<channel>``, ``msl:<channel>``, ``table``, ``daphnet`` or
        ``tep:<fault>``; the part after ``:`` may be left out when ``root`` holds a single machine/channel (and for
        ``tep``, whose default is fault 1).
    root : path, optional
        The dataset's folder (or file, for ``table``); not needed for ``synthetic``, ``daphnet`` and ``tep`` (read
        from the installed aeon/bibmon wheels).
    missing : {"error", "interpolate", "hold"}
        What a missing sensor value of a ``table`` dataset gets (``mscred.data.io.load_table``); the others have
        none.
    encoding : str, optional
        Text encoding of a ``table`` dataset's CSV files (its parts and anomalies.csv), as ``load_table``'s; None:
        UTF-8, a BOM allowed. The other datasets' files are in their publishers' format and ignore it.
    reading : mscred.data.reading.Reading, optional
        How a ``table`` dataset's tables are read beyond their format (a time column under another name, text for
        a missing value), as ``load_table``'s.

    Returns
    -------
    LabeledDataset

    Raises
    ------
    InputError
        Unknown name, missing root, or a file missing or malformed in the layout.
    """
    kind, _, item = str(name).partition(":")
    kind = kind.strip().lower()
    if kind not in DATASETS:
        raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if kind == "synthetic":
        from mscred.data.synthetic import generate_synthetic

        data = generate_synthetic()
        return LabeledDataset("synthetic", data.train, data.test, data.anomalies, "the paper's synthetic data, seed 0")
    if kind == "daphnet":
        return _load_daphnet(root)
    if kind == "tep":
        return _load_tep(root, item)
    if root is None:
        what = ("a folder (train.* + test.*) or one labelled table" if kind == "table" else "a root folder")
        layout = {"smd": _SMD, "smap": _TELEMANOM, "msl": _TELEMANOM}.get(kind, "")
        # (SMD/SMAP/MSL are never shipped: say where they come from, as a missing file does)
        raise InputError(f"dataset {kind!r} needs {what} (root=... / --data-root){_WHERE.get(layout, '')}")
    root = Path(root)
    if not root.exists():
        layout = {"smd": _SMD, "smap": _TELEMANOM, "msl": _TELEMANOM}.get(kind, "")   # (table: the user's own files)
        raise InputError(f"{root}: not found{_WHERE.get(layout, '')}")
    if kind == "smd":
        return _load_smd(root, item)
    if kind in ("smap", "msl"):
        return _load_telemanom(root, kind, item)
    return _load_table_dataset(root, missing, encoding, reading)


# ------------------------------------------------------------------------------------------------------ helpers


def intervals_from_labels(labels: np.ndarray, timestamps=None) -> pd.DataFrame:
    """Maximal runs of 1 in ``labels`` (T,) as an anomalies frame with empty root causes.

    ``start``/``end`` are ``timestamps[first]`` and ``timestamps[last] + 1`` (row numbers when timestamps is None).
    """
    labels = np.asarray(labels).astype(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], labels, [0]))))
    starts, ends = edges[0::2], edges[1::2]  # half-open [start, end) in rows
    ts = np.arange(len(labels)) if timestamps is None else np.asarray(timestamps)
    rows = [
        {"start": int(ts[s]), "end": int(ts[e - 1]) + 1, "root_causes": "", "duration": int(e - s)}
        for s, e in zip(starts, ends)
    ]
    return pd.DataFrame(rows, columns=ANOMALY_COLUMNS)


def _frame(values: np.ndarray, sensors: list[str], labels: Optional[np.ndarray] = None) -> pd.DataFrame:
    df = pd.DataFrame(values, columns=sensors)
    df.insert(0, TIMESTAMP, np.arange(len(df), dtype=np.int64))
    if labels is not None:
        df[LABEL] = labels.astype(np.int64)
    return df


def _need_file(path: Path, layout: str) -> Path:
    if not path.is_file():
        raise InputError(f"{path}: not found (expected the {layout}){_WHERE.get(layout, '')}")
    return path


def _pick(item: str, folder: Path, suffix: str, what: str, layout: str) -> str:
    """The machine/channel to load: ``item``, or the only one in ``folder``."""
    if item:
        return item.strip()
    if not folder.is_dir():
        raise InputError(f"{folder}: not found (expected the {layout}){_WHERE.get(layout, '')}")
    found = sorted(p.stem for p in folder.glob(f"*{suffix}"))
    if len(found) == 1:
        return found[0]
    listed = ", ".join(found[:8]) + (" ..." if len(found) > 8 else "")
    raise InputError(f"{folder}: name a {what} ({'none found' if not found else 'one of ' + listed})")


def _nearest(wanted: str, names: list[str], what: str) -> str:
    """``did you mean X?`` for a typo, else the names there (the first 8), for a "no such machine/channel" line."""
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
    if not close:  # a case slip ("Machine-1-1", "p-1") is no typo difflib scores high enough
        close = [n for n in names if n.lower() == wanted.lower()]
    if close:  # (with the count: a copy holding only some machines/channels shows here)
        return "did you mean " + " or ".join(close) + f"? ({len(names)} {what}{'s' if len(names) > 1 else ''} there)"
    listed = ", ".join(names[:8]) + (f" ... ({len(names)} in all)" if len(names) > 8 else "")
    return f"the {what}s there: {listed}" if names else f"no {what} there"


def _layouts_below(root: Path, holds) -> list[Path]:
    """The folders one or two levels below ``root`` (hidden ones skipped) for which ``holds(folder)`` is true."""
    found: list[Path] = []
    try:
        level = [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")]
        for folder in level:
            if holds(folder):
                found.append(folder)
            else:
                found += [p for p in sorted(folder.iterdir())
                          if p.is_dir() and not p.name.startswith(".") and holds(p)]
    except OSError:  # (unreadable folders: the caller's "not found" names what was expected)
        pass
    return found


def _has_parts(folder: Path) -> bool:
    return (folder / "train").is_dir() and (folder / "test").is_dir()


def _dataset_folder(root: Path, parts: tuple[str, ...], what: str) -> Path:
    """The folder of a dataset's ``train/`` and ``test/`` as users point at it: ``root`` itself; its parent when
    ``root`` is one of the part folders (``--data-root ServerMachineDataset/train``); the one folder one or two
    levels below that holds both (a GitHub checkout above ``ServerMachineDataset/``, the Kaggle SMAP/MSL copy's
    ``data/data/``). Several below are refused, naming them; none leaves ``root`` (the caller says what is missing).
    """
    if (root / "train").is_dir():
        return root
    if root.name in parts and _has_parts(root.parent):
        return root.parent
    found = _layouts_below(root, _has_parts)
    if len(found) > 1:
        listed = ", ".join(str(p) for p in found[:4]) + (" ..." if len(found) > 4 else "")
        raise InputError(f"{root}: holds more than one {what} (train/ and test/ in {listed}); pass the one to use "
                         "as --data-root")
    return found[0] if found else root


def _read_headerless(path: Path) -> np.ndarray:
    """A comma-separated numeric text file without header (SMD) as float64 (T, n), validated cell by cell."""
    try:
        df = pd.read_csv(path, header=None, **float_read_options())   # (the nearest floats on any pandas)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None
    if df.shape[1] > 1 and df.iloc[:, -1].isna().all():
        # Every line ending in a comma (a spreadsheet's export) read as one more, empty, dimension, refused as
        # "column N: missing value ... --missing interpolate": it is no dimension at all.
        df = df.iloc[:, :-1]
    df.columns = [f"column {j + 1}" for j in range(df.shape[1])]
    return table_from_frame(df, source=str(path)).values


def _read_labels(path: Path, expected: int) -> np.ndarray:
    """One 0/1 label per line; its length must match the test part."""
    values = _read_headerless(path)
    if values.shape[1] != 1:
        raise InputError(f"{path}: expected one label per line, got {values.shape[1]} columns")
    labels = values[:, 0]
    bad = np.flatnonzero((labels != 0) & (labels != 1))
    if len(bad):
        raise InputError(f"{path}: row {bad[0] + 1}: label {labels[bad[0]]:g} is not 0 or 1")
    if len(labels) != expected:
        raise InputError(f"{path}: {len(labels)} labels for {expected} test rows")
    return labels.astype(np.int64)


def _data_lines(path: Path, header: bool) -> Optional[list[int]]:
    """The 1-based file line on which each data row that ``pandas.read_csv`` gives of ``path`` starts (the header
    line left out when ``header``), or None when the file cannot be read again as text.

    pandas skips blank (and blank-only) lines and a quoted cell may run over several lines, so ``row + 2`` (or
    ``row + 1`` without a header) named a line too low past every blank line in the middle of a file.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            starts, line = [], 1
            for fields in reader:
                if len(fields) > 1 or (fields and fields[0].strip()):   # what pandas keeps as a row
                    starts.append(line)
                line = reader.line_num + 1
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return starts[1:] if header else starts


def _file_line(path: Path, row: int, rows: int, header: bool) -> int:
    """The 1-based file line of data row ``row`` (0-based, of ``rows``) of ``path`` as pandas read it
    (:func:`_data_lines`); the count without blank lines where the file does not read back row for row."""
    lines = _data_lines(path, header)
    if lines is None or len(lines) != rows:
        return row + (2 if header else 1)
    return lines[row]


def _read_npy(path: Path) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read as .npy: {' '.join(str(exc).split())}") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0:
        raise InputError(f"{path}: expected a non-empty 2-D array (T, n), got shape {array.shape}")
    if array.dtype == np.bool_:
        # True/False as 1/0: the same values as a 0/1 integer array are accepted (telemanom's one-hot command
        # columns), so a bool array was refused for its dtype alone.
        array = array.astype(np.int8)
    if not np.issubdtype(array.dtype, np.number):
        raise InputError(f"{path}: expected numbers, got dtype {array.dtype}")
    columns = [f"column {j + 1}" for j in range(array.shape[1])]
    return table_from_frame(pd.DataFrame(array, columns=columns), source=str(path)).values


# ---------------------------------------------------------------------------------------------------------- SMD

_SMD = "Server Machine Dataset layout (train/, test/, test_label/[, interpretation_label/])"


SMD_PARTS = ("train", "test", "test_label", "interpretation_label")


def smd_folder(root: str | os.PathLike) -> Path:
    """The SMD folder (``train/``, ``test/``, ...) for a ``--data-root``: ``root``, or the ``ServerMachineDataset/``
    one or two levels below it (a GitHub checkout), or the folder above when ``root`` is its ``train/`` & co."""
    return _dataset_folder(Path(root), SMD_PARTS, "Server Machine Dataset")


def _load_smd(root: Path, machine: str) -> LabeledDataset:
    root = smd_folder(root)
    machine = _pick(machine, root / "train", ".txt", "machine (smd:<machine>)", _SMD)
    if machine.lower().endswith(".txt"):  # "smd:machine-1-1.txt" (a file name) read train/machine-1-1.txt.txt
        machine = machine[: -len(".txt")]
    train_path = root / "train" / f"{machine}.txt"
    if not train_path.is_file() and (root / "train").is_dir():
        # A typo said only "not found ... SMD is the ServerMachineDataset folder of <url>": name the nearest
        # machines there too (the where-from stays: a copy may hold only some machines).
        names = sorted(p.stem for p in (root / "train").glob("*.txt"))
        if names:
            raise InputError(f"{train_path}: not found (expected the {_SMD}): no machine {machine!r}, "
                             f"{_nearest(machine, names, 'machine')}{_WHERE[_SMD]}")
    train = _read_headerless(_need_file(train_path, _SMD))
    test = _read_headerless(_need_file(root / "test" / f"{machine}.txt", _SMD))
    if train.shape[1] != test.shape[1]:
        raise InputError(f"{root}: train has {train.shape[1]} dimensions, test has {test.shape[1]} ({machine})")
    labels = _read_labels(_need_file(root / "test_label" / f"{machine}.txt", _SMD), len(test))
    width = max(2, len(str(train.shape[1])))
    sensors = [f"dim_{j + 1:0{width}d}" for j in range(train.shape[1])]
    interpretation = root / "interpretation_label" / f"{machine}.txt"
    note = ""
    if interpretation.is_file():
        anomalies = _read_interpretation(interpretation, sensors, len(test))
        # An interval over rows test_label calls all normal means the two files disagree (another machine's file,
        # a shifted copy): evaluation would report "anomalies found 0/1" beside a point recall of 1.0, silently.
        for start, end in zip(anomalies["start"], anomalies["end"]):
            if not labels[start:end].any():
                raise InputError(f"{interpretation}: interval {start + 1}-{end} covers no anomalous row of "
                                 f"{root / 'test_label' / f'{machine}.txt'} (the two files disagree)")
        # The other way round: a labelled run no interpretation line touches (an empty or shortened file) was left
        # out of the events, so "anomalies found" counted fewer anomalies than test_label holds, with no word.
        # Such runs are events with unknown root causes, as without the file.
        covered = np.zeros(len(labels) + 1, dtype=np.int64)
        for start, end in zip(anomalies["start"], anomalies["end"]):
            covered[start] += 1
            covered[end] -= 1
        covered = np.cumsum(covered)[:-1] > 0
        runs = intervals_from_labels(labels)
        loose = runs[[not covered[s:e].any() for s, e in zip(runs["start"], runs["end"])]]
        if len(loose):
            anomalies = (pd.concat([anomalies, loose]) if len(anomalies) else loose.copy())
            anomalies = anomalies.sort_values(["start", "end"], kind="stable").reset_index(drop=True)
            note = (f"; {len(loose)} labelled anomal{'y' if len(loose) == 1 else 'ies'} of test_label "
                    f"without an interpretation_label line (root causes unknown)")
    else:
        anomalies = intervals_from_labels(labels)
    return LabeledDataset(
        f"smd:{machine}",
        _frame(train, sensors),
        _frame(test, sensors, labels),
        anomalies,
        f"Server Machine Dataset, machine {machine}, from {root}{note}",
    )


def _read_interpretation(path: Path, sensors: list[str], test_rows: int) -> pd.DataFrame:
    """Lines ``start-end:d1,d2,...``: 1-based inclusive test rows, 1-based dimensions (OmniAnomaly's format)."""
    try:  # a damaged file is bad input naming it (it was an internal UnicodeDecodeError, "error:" in a fleet)
        text = path.read_text(encoding="utf-8-sig")  # (a BOM, as Notepad saves, made line 1 "malformed")
    except (UnicodeDecodeError, OSError) as exc:
        raise InputError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            span, dims = line.split(":")
            first, last = (int(v) for v in span.split("-"))
            columns = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise InputError(f"{path}: line {number}: expected 'start-end:dim,dim,...', got {line.strip()!r}") from None
        if not 1 <= first <= last <= test_rows:
            raise InputError(f"{path}: line {number}: rows {first}-{last} outside the test part (1..{test_rows})")
        bad = [d for d in columns if not 1 <= d <= len(sensors)]
        if bad or not columns:
            raise InputError(f"{path}: line {number}: dimension(s) {bad or 'none'} not in 1..{len(sensors)}")
        rows.append(
            {
                "start": first - 1,
                "end": last,
                "root_causes": ";".join(sensors[d - 1] for d in columns),
                "duration": last - first + 1,
            }
        )
    return pd.DataFrame(rows, columns=ANOMALY_COLUMNS)


# ------------------------------------------------------------------------------------------------ SMAP / MSL

_TELEMANOM = "SMAP/MSL layout (train/<chan>.npy, test/<chan>.npy, labeled_anomalies.csv)"


# These are never shipped nor downloaded (README, "Evaluation you can trust"): a missing file says where they come
# from, the projects the module docstring names (OmniAnomaly's SMD, telemanom's SMAP/MSL).
_WHERE = {
    _SMD: "; SMD is the ServerMachineDataset folder of https://github.com/NetManAIOps/OmniAnomaly "
          "(README.md, 'Evaluation you can trust')",
    _TELEMANOM: "; SMAP/MSL are data/ and labeled_anomalies.csv of https://github.com/khundman/telemanom "
                "(README.md, 'Evaluation you can trust')",
}


def telemanom_layout(root: str | os.PathLike) -> tuple[Path, Path]:
    """(the folder of ``train/`` and ``test/``, the ``labeled_anomalies.csv`` to read) for a ``--data-root``.

    telemanom keeps the arrays in ``data/train``, ``data/test`` and the table beside ``data/``; the Kaggle copy has
    them in ``data/data/`` under the table. ``root`` may be any of these folders (or ``train/`` itself): the arrays
    are found one or two levels below it, the table in it, beside the arrays or up to two levels above them. The
    table path returned may not exist (the caller says so).
    """
    root = Path(root)
    data = _dataset_folder(root, ("train", "test"), "SMAP/MSL layout")
    places = [root, data, data.parent, data.parent.parent, root.parent]
    table = next((p / "labeled_anomalies.csv" for p in places if (p / "labeled_anomalies.csv").is_file()), None)
    return data, table or root / "labeled_anomalies.csv"


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive [start, end] row spans, sorted, with those that overlap or touch (one ends on the row before the
    other starts) joined into one."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _load_telemanom(root: Path, spacecraft: str, channel: str) -> LabeledDataset:
    """One SMAP/MSL channel: its train/test arrays and, from ``labeled_anomalies.csv``, the labels and events.

    The anomaly sequences of the channel (over all its rows of the table) that overlap or touch are merged into one
    event. The per-row labels cannot tell them apart, but the event metrics count events: overlapping sequences (a
    table merged from two copies or two labellers, one sequence inside another) made one stretch of anomalous rows
    two events, both "found" by one alarm, and touching ones ([3, 5] and [6, 8]) split one stretch in two, where the
    same labels in a table or SMD file give one event (``intervals_from_labels``: maximal runs of 1).
    """
    data, table_path = telemanom_layout(root)
    _need_file(table_path, _TELEMANOM)
    try:
        table = pd.read_csv(table_path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise InputError(f"{table_path}: cannot read: {' '.join(str(exc).split())}") from None
    missing = {"chan_id", "spacecraft", "anomaly_sequences"} - set(table.columns)
    if missing:
        raise InputError(f"{table_path}: missing column(s) {', '.join(sorted(missing))}")
    # (stripped: " SMAP" or "P-1 " of a hand-edited table matched nothing, "no SMAP channel 'P-1'")
    table["spacecraft"] = table["spacecraft"].astype(str).str.strip()
    table["chan_id"] = table["chan_id"].astype(str).str.strip()
    ours = table[table["spacecraft"].str.upper() == spacecraft.upper()]
    if not channel:
        channels = sorted(c for c in ours["chan_id"].astype(str) if (data / "test" / f"{c}.npy").is_file())
        if not channels:  # ("name a channel: none found" said neither what was looked for nor where)
            raise InputError(f"{table_path}: no {spacecraft.upper()} channel has its arrays in {data / 'test'} "
                             f"({len(ours)} {spacecraft.upper()} row(s) in the table)")
        if len(channels) != 1:
            listed = ", ".join(channels[:8]) + (" ..." if len(channels) > 8 else "")
            raise InputError(f"{table_path}: name a channel ({spacecraft}:<chan>): {listed}")
        channel = channels[0]
    channel = channel.strip()
    if channel.lower().endswith(".npy"):  # "smap:P-1.npy" (a file name) read train/P-1.npy.npy
        channel = channel[: -len(".npy")]
    row = ours[ours["chan_id"] == channel]
    if row.empty:
        # Say why: the channel is the other spacecraft's (msl:P-1), or a typo's nearest names.
        other = table[table["chan_id"] == channel]["spacecraft"]
        if len(other):
            hint = f"{channel} is a channel of {other.iloc[0]}"
            if other.iloc[0].lower() in DATASETS:
                hint += f": {other.iloc[0].lower()}:{channel}"
        else:
            hint = _nearest(channel, sorted(set(ours["chan_id"])), f"{spacecraft.upper()} channel")
        raise InputError(f"{table_path}: no {spacecraft.upper()} channel {channel!r}; {hint}")
    train = _read_npy(_need_file(data / "train" / f"{channel}.npy", _TELEMANOM))
    test = _read_npy(_need_file(data / "test" / f"{channel}.npy", _TELEMANOM))
    if train.shape[1] != test.shape[1]:
        raise InputError(f"{data}: {channel}: train has {train.shape[1]} columns, test has {test.shape[1]}")
    labels = np.zeros(len(test), dtype=np.int64)
    spans: list[tuple[int, int]] = []

    def line(index) -> int:   # 1-based file line of a table row, counted only when an error names it
        return _file_line(table_path, int(index), len(table), header=True)

    # Every row of the channel: the first alone was read, so a second row's anomalies (a table merged from two
    # copies, one row per anomaly) were labelled normal, silently.
    for index in row.index:
        text = str(table.at[index, "anomaly_sequences"])
        try:
            sequences = ast.literal_eval(text)  # a literal list of [start, end] pairs, never code
            # Whole numbers only: int() truncated [[1.5, 2.7]] to [1, 2] silently (True/False are not rows either).
            if any(type(v) is not int for pair in sequences for v in pair):
                raise ValueError("not whole numbers")
            sequences = [(int(a), int(b)) for a, b in sequences]
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise InputError(f"{table_path}: line {line(index)}: anomaly_sequences {text!r} is not a list of "
                             "[start, end] (whole numbers)") from None
        # telemanom's num_values is the length of the channel's test array: another length means the table and the
        # arrays are of different releases or channels, and every sequence would label the wrong rows, silently.
        if "num_values" in table.columns:
            count = coerce_float64(pd.Series([table.at[index, "num_values"]], dtype=object))[0]
            if pd.notna(count) and count != len(test):
                test_path = data / "test" / f"{channel}.npy"
                raise InputError(f"{table_path}: line {line(index)}: num_values {count:g} but {test_path} has "
                                 f"{len(test)} rows (the table and the arrays are not of the same release)")
        for a, b in sequences:
            if a > b:
                raise InputError(f"{table_path}: line {line(index)}: sequence [{a}, {b}] ends before it starts")
            if not 0 <= a <= b < len(test):
                raise InputError(f"{table_path}: line {line(index)}: sequence [{a}, {b}] outside the test part "
                                 f"(0..{len(test) - 1})")
            labels[a : b + 1] = 1
            spans.append((a, b))
    rows = [{"start": a, "end": b + 1, "root_causes": "", "duration": b - a + 1} for a, b in _merged(spans)]
    width = max(2, len(str(train.shape[1] - 1)))
    sensors = ["telemetry", *[f"command_{j:0{width}d}" for j in range(1, train.shape[1])]]
    return LabeledDataset(
        f"{spacecraft}:{channel}",
        _frame(train, sensors),
        _frame(test, sensors, labels),
        pd.DataFrame(rows, columns=ANOMALY_COLUMNS),
        f"NASA {spacecraft.upper()} channel {channel}, from {data}",
    )


# ------------------------------------------------------------------------------------------------ generic table


def _find_part(root: Path, stem: str) -> Optional[Path]:
    for suffix in _TABLE_SUFFIXES:
        if (root / f"{stem}{suffix}").is_file():
            return root / f"{stem}{suffix}"
    return None


def _table_frame(table, with_label: bool) -> pd.DataFrame:
    df = pd.DataFrame(table.values, columns=table.sensors)
    df.insert(0, TIMESTAMP, np.asarray(table.index))
    if with_label:
        df[LABEL] = table.labels
    return df


def _read_table_anomalies(path: Path, test, encoding: Optional[str] = None) -> pd.DataFrame:
    """``anomalies.csv`` beside a table dataset, checked now as evaluation will read it against the test part.

    Unchecked, an empty/non-UTF-8 file was an internal error, and text cells, ragged rows or intervals off the
    test timestamps loaded fine: the demo trained and wrote its outputs, then failed at evaluation naming its own
    copy of the file. Evaluation's reader and interval rule are reused, so the two cannot drift apart.
    """
    from mscred.data.io import read_frame
    from mscred.evaluation import events_from_anomalies, split_names

    # The options of mscred.evaluation.read_frame (text kept, only empty cells missing), whose extra "no data rows"
    # refusal is left out: a dataset without anomalies writes a header-only anomalies.csv.
    anomalies = read_frame(path, npy=False, encoding=encoding, keep_default_na=False, na_values=[""])
    anomalies.columns = [str(c) for c in anomalies.columns]
    if list(anomalies.columns) != ANOMALY_COLUMNS:
        raise InputError(f"{path}: expected columns {', '.join(ANOMALY_COLUMNS)}")
    if len(anomalies):
        # Raises on non-numeric start/end, end not after start (end is exclusive), and on an event wholly
        # outside the test timestamps, which evaluation would drop (labelled data that evaluation silently
        # ignores is a wrong file, not a detail).
        # Date-time start/end are placed by instant on date-time timestamps, as `mscred evaluate` places them (the
        # demo and fleet evaluate through it); they stay text here, numbers become numbers.
        events_from_anomalies(anomalies, np.asarray(test.index), str(path), timestamps="the test part's",
                               refuse_outside=True, dates_ok=True)
        for column in ("start", "end"):
            # (to_numeric keeps whole numbers int64; events_from_anomalies above refused what it cannot convert)
            numbers = pd.to_numeric(anomalies[column], errors="coerce")
            if numbers.notna().all():
                anomalies[column] = numbers
    # As before: an empty root_causes cell is "" (unknown), not NaN.
    anomalies["root_causes"] = anomalies["root_causes"].fillna("").astype(str)
    # A name that is no sensor of the data (a typo, another export's names) could never be found: root-cause recall
    # would read low with no word of why.
    sensors = set(test.sensors)
    for row, cell in enumerate(anomalies["root_causes"]):
        unknown = [name for name in split_names(cell) if name not in sensors]
        if unknown:
            raise InputError(f"{path}: row {row + 1}: root cause {unknown[0]!r} is not a sensor of the test data")
    return anomalies


def _load_table_dataset(root: Path, missing: str = "error", encoding: Optional[str] = None,
                        reading: Optional[Reading] = None) -> LabeledDataset:
    if root.is_dir():
        train_path, test_path = _find_part(root, "train"), _find_part(root, "test")
        if train_path is None or test_path is None:
            # (the part that is missing named first: a fleet's half sub-folder listed only what it expected)
            absent = " and ".join(p for p, path in (("train", train_path), ("test", test_path)) if path is None)
            raise InputError(f"{root}: no {absent} part: expected train.csv and test.csv (or .parquet/.npy) with a "
                             "'label' column in test")
        train = load_table(train_path, missing=missing, encoding=encoding, reading=reading)
        test = load_table(test_path, missing=missing, encoding=encoding, reading=reading)
        if test.labels is None:
            raise InputError(f"{test_path}: no '{LABEL}' column")
        if train.sensors != test.sensors:
            raise InputError(f"{test_path}: sensors differ from {train_path.name}'s")
        anomalies_path = root / "anomalies.csv"
        if anomalies_path.is_file():
            anomalies = _read_table_anomalies(anomalies_path, test, encoding)
        else:
            anomalies = intervals_from_labels(test.labels, test.index)
        return LabeledDataset(
            f"table:{root.name}", _table_frame(train, False), _table_frame(test, True), anomalies, f"tables in {root}"
        )
    table = load_table(root, missing=missing, encoding=encoding, reading=reading)
    if table.labels is None:
        raise InputError(f"{root}: no '{LABEL}' column")
    cut = int(len(table.values) * TABLE_TRAIN_FRACTION)
    if cut < 1 or cut >= len(table.values):
        raise InputError(f"{root}: too few rows ({len(table.values)}) to split into train and test")
    whole = _table_frame(table, True)
    train = whole.iloc[:cut].drop(columns=[LABEL]).reset_index(drop=True)
    test = whole.iloc[cut:].reset_index(drop=True)
    return LabeledDataset(
        f"table:{root.stem}",
        train,
        test,
        intervals_from_labels(test[LABEL].to_numpy(), test[TIMESTAMP].to_numpy()),
        f"{root}, first {TABLE_TRAIN_FRACTION:.0%} of rows as training part (its labels unused)",
    )


# ---------------------------------------------------------------------------------------------------- Daphnet

_DAPHNET_FILE = Path("Daphnet_S06R02E0") / "S06R02E0.csv"


def _daphnet_file(root: Optional[Path]) -> Path:
    if root is not None:
        root = Path(root)
        for candidate in (root, root / "S06R02E0.csv", root / _DAPHNET_FILE):
            if candidate.is_file():
                return candidate
        raise InputError(f"{root}: no S06R02E0.csv (the Daphnet file aeon ships)")
    spec = importlib.util.find_spec("aeon")  # finds the installed package without importing it (no numba load)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("dataset 'daphnet' needs the aeon package, which ships it: pip install 'mscred[datasets]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / _DAPHNET_FILE
    if not path.is_file():
        raise InputError(f"{path}: not found; this aeon version no longer ships Daphnet S06R02E0 (aeon < 1.7 does)")
    return path


def _load_daphnet(root) -> LabeledDataset:
    path = _daphnet_file(root)
    try:
        raw = pd.read_csv(path, **float_read_options())
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None
    if "is_anomaly" not in raw.columns:
        raise InputError(f"{path}: no 'is_anomaly' column (expected the TimeEval CSV format)")
    # Checked under its own name: after the rename below, table_from_frame reported a bad value as column 'label',
    # a column the file does not have.
    flags = pd.Series(coerce_float64(raw["is_anomaly"]), index=raw.index)
    bad = np.flatnonzero(~flags.isin([0, 1]).to_numpy())
    if len(bad):
        raise InputError(f"{path}: column 'is_anomaly' row {bad[0] + 1}: {short_repr(raw['is_anomaly'].iloc[bad[0]])} "
                         "is not 0 or 1")
    # TimeEval format: timestamp, channels..., is_anomaly. Timestamps are 1970-based clock times 15 ms apart; the
    # model works in steps, so rows are renumbered.
    frame = raw.drop(columns=[c for c in ("timestamp",) if c in raw.columns]).rename(columns={"is_anomaly": LABEL})
    table = table_from_frame(frame, source=str(path))
    cut = int(len(table.values) * DAPHNET_TRAIN_FRACTION)
    labels = table.labels[cut:]
    return LabeledDataset(
        "daphnet",
        _frame(table.values[:cut], table.sensors),
        _frame(table.values[cut:], table.sensors, labels),
        intervals_from_labels(labels),
        "Daphnet freezing of gait, recording S06R02E0 (9 accelerometer channels), as shipped in the aeon wheel; "
        f"first {DAPHNET_TRAIN_FRACTION:.0%} for training. This excerpt has NO labelled anomaly: every alarm on it "
        "is a false alarm.",
    )


# ------------------------------------------------------------------------------------------- Tennessee Eastman

_TEP = "Tennessee Eastman files (d00.dat, d00_te.dat, d<fault>_te.dat, as bibmon ships them)"
TEP_SENSORS = [f"xmeas_{j:02d}" for j in range(1, 42)] + [f"xmv_{j:02d}" for j in range(1, 12)]


def _tep_dir(root) -> Path:
    if root is not None:
        root = Path(root)
        for candidate in (root, root / "tennessee_eastman", root / "bibmon" / "tennessee_eastman"):
            if (candidate / "d00.dat").is_file():
                return candidate
        raise InputError(f"{root}: no d00.dat (expected the {_TEP})")
    spec = importlib.util.find_spec("bibmon")  # locates the installed package without importing it (and its deps)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("dataset 'tep' needs the bibmon package, which ships it: pip install 'mscred[datasets]'")
    folder = Path(next(iter(spec.submodule_search_locations))) / "tennessee_eastman"
    if not (folder / "d00.dat").is_file():
        raise InputError(f"{folder}: no d00.dat; this bibmon version does not ship the Tennessee Eastman files")
    return folder


def _read_tep(path: Path) -> np.ndarray:
    """One whitespace-separated Braatz file as float64 (T, 52); ``d00.dat`` is stored transposed (52 rows)."""
    _need_file(path, _TEP)
    try:
        raw = pd.read_csv(path, sep=r"\s+", header=None, **float_read_options())
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None
    transposed = raw.shape[0] == len(TEP_SENSORS) and raw.shape[1] != len(TEP_SENSORS)
    numeric = raw.apply(lambda column: pd.Series(coerce_float64(column), index=column.index))
    # A text cell was "cannot read: could not convert string to float: 'abc'", with no place: name its sample and
    # variable (as the non-finite check below does) and its line in the file.
    text = np.argwhere((numeric.isna() & raw.notna()).to_numpy())
    if len(text):
        r, c = text[0]
        sample, variable = (c + 1, r + 1) if transposed else (r + 1, c + 1)
        raise InputError(f"{path}: line {_file_line(path, r, len(raw), header=False)}: sample {sample}, variable "
                         f"{variable}: value {short_repr(raw.iat[r, c])} is not a number")
    values = numeric.to_numpy(dtype=np.float64)
    if transposed:
        values = values.T
    if values.ndim != 2 or values.shape[1] != len(TEP_SENSORS):
        raise InputError(f"{path}: expected {len(TEP_SENSORS)} variables per sample, got shape {values.shape}")
    bad = np.argwhere(~np.isfinite(values))
    if len(bad):
        raise InputError(f"{path}: sample {bad[0][0] + 1}, variable {bad[0][1] + 1}: not a finite number")
    return values


def _load_tep(root, item: str) -> LabeledDataset:
    try:
        fault = int(item) if item.strip() else 1
    except ValueError:
        fault = -1
    if fault not in TEP_FAULTS:
        raise InputError(f"dataset 'tep:{item}': the fault must be one of 1..{TEP_FAULTS[-1]}")
    folder = _tep_dir(root)
    train = np.concatenate([_read_tep(folder / "d00.dat"), _read_tep(folder / "d00_te.dat")])
    test = _read_tep(folder / f"d{fault:02d}_te.dat")
    if len(test) <= TEP_FAULT_START:
        raise InputError(f"{folder / f'd{fault:02d}_te.dat'}: {len(test)} samples; the fault starts after "
                         f"{TEP_FAULT_START}")
    labels = (np.arange(len(test)) >= TEP_FAULT_START).astype(np.int64)
    return LabeledDataset(
        f"tep:{fault}",
        _frame(train, TEP_SENSORS),
        _frame(test, TEP_SENSORS, labels),
        intervals_from_labels(labels),
        f"Tennessee Eastman process (SIMULATED plant, Braatz data as shipped in bibmon), fault {fault}: normal for "
        f"the first {TEP_FAULT_START} test samples, faulty after; trained on the fault-free runs d00 + d00_te.",
    )
