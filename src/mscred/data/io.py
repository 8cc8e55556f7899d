"""Read and validate input tables (CSV, Parquet, .npy) and normalise them.

Every numeric column of a table is a sensor, except a column named ``timestamp`` (kept as the index) and one named
``label`` (ground truth 0/1, ignored by training). Every bad input raises :class:`~mscred.errors.InputError` with one
line saying what is wrong and where: file, column and 1-based data row (row 1 is the first row after the header).
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from mscred.errors import InputError

__all__ = ["Table", "load_table", "table_from_frame", "Normalizer", "TIMESTAMP", "LABEL"]

TIMESTAMP = "timestamp"
LABEL = "label"
_CSV = {".csv", ".txt", ".tsv"}
_PARQUET = {".parquet", ".pq"}
_NPY = {".npy"}


@dataclass
class Table:
    """A validated multivariate series.

    Attributes
    ----------
    values : np.ndarray, float64, shape (T, n)
        Sensor values, all finite.
    sensors : list of str, length n
        Sensor (column) names, in column order.
    index : pd.Index, length T
        The ``timestamp`` column, or a RangeIndex 0..T-1.
    labels : np.ndarray of int64, shape (T,), or None
        The ``label`` column (0 normal, 1 anomalous), when present.
    source : str
        Where the table came from (a path, or ``<DataFrame>``), for messages.
    """

    values: np.ndarray
    sensors: list[str]
    index: pd.Index
    labels: Optional[np.ndarray] = None
    source: str = field(default="<DataFrame>")

    def frame(self, with_label: bool = True) -> pd.DataFrame:
        """The table as a DataFrame (sensor columns, plus ``label`` when present), indexed by ``index``."""
        df = pd.DataFrame(self.values, columns=self.sensors, index=self.index)
        if with_label and self.labels is not None:
            df[LABEL] = self.labels
        return df


def load_table(path: str | os.PathLike) -> Table:
    """Read a CSV, Parquet or .npy file and validate it.

    Parameters
    ----------
    path : str or PathLike
        ``.csv`` (also ``.txt``/``.tsv``, separator sniffed), ``.parquet``/``.pq``, or ``.npy`` (a 2-D numeric
        array (T, n) whose columns become ``sensor_0 ..``, a 1-D array (T,) as one sensor, or a structured array
        whose field names are the columns).

    Returns
    -------
    Table

    Raises
    ------
    InputError
        Missing file, unknown format, unreadable or empty table, no sensor column, a non-numeric value, a NaN or
        infinite value, or a bad label; the message names the file, and the column and row where it applies.
    """
    return table_from_frame(read_frame(path), source=str(Path(path)))


def read_frame(path: str | os.PathLike, *, npy: bool = True, **csv_options: Any) -> pd.DataFrame:
    """Read a CSV (also .txt/.tsv), Parquet or, with ``npy``, .npy file into a DataFrame, without validating its
    values; every failure is an InputError naming the file. ``csv_options`` go to ``pandas.read_csv``.

    :func:`load_table` validates what this returns; ``mscred.evaluation`` reads SCORES.csv (text columns) with it.
    """
    path = Path(path)
    kinds = ".csv, .parquet or .npy" if npy else ".csv or .parquet"
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a {kinds} file")
    suffix = path.suffix.lower()
    if suffix in _CSV:
        return _read_csv(path, **csv_options)
    if suffix in _PARQUET:
        return _read_parquet(path)
    if npy and suffix in _NPY:
        return _read_npy(path)
    raise InputError(f"{path}: unknown file type {suffix or '(none)'!r}; expected {kinds}")


def table_from_frame(df: pd.DataFrame, source: str = "<DataFrame>") -> Table:
    """Validate a DataFrame as :func:`load_table` does (the estimator's entry point for DataFrames).

    A ``timestamp`` column becomes the index (otherwise the frame's own index is kept when it is not a plain
    RangeIndex); a ``label`` column becomes ``labels``; every other column must be numeric and finite.
    Rows are reported 1-based in frame order.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{source}: expected a table (DataFrame), got {type(df).__name__}")
    if df.shape[0] == 0:
        raise InputError(f"{source}: the table has no data rows")
    columns = [str(c) for c in df.columns]
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        raise InputError(f"{source}: duplicate column name(s): {', '.join(duplicated)}")
    df = df.set_axis(columns, axis=1)

    if TIMESTAMP in df.columns:
        index = pd.Index(df[TIMESTAMP].to_numpy(), name=TIMESTAMP)
        bad = np.flatnonzero(pd.isna(index))
        if len(bad):
            raise InputError(f"{source}: column '{TIMESTAMP}' row {bad[0] + 1}: missing timestamp")
    elif isinstance(df.index, pd.RangeIndex):
        index = pd.RangeIndex(len(df))
    else:
        index = df.index

    labels = _labels(df[LABEL], source) if LABEL in df.columns else None
    sensors = [c for c in df.columns if c not in (TIMESTAMP, LABEL)]
    if not sensors:
        raise InputError(f"{source}: no sensor columns (only '{TIMESTAMP}'/'{LABEL}')")
    values = np.empty((len(df), len(sensors)), dtype=np.float64)
    for j, col in enumerate(sensors):
        values[:, j] = _numeric_column(df[col], col, source)
    return Table(values=values, sensors=sensors, index=index, labels=labels, source=source)


def _numeric_column(series: pd.Series, col: str, source: str) -> np.ndarray:
    """A column as finite float64, or InputError at its first bad value (1-based row)."""
    if pd.api.types.is_bool_dtype(series.dtype):
        numbers = series.to_numpy(dtype=np.float64)
    elif pd.api.types.is_numeric_dtype(series.dtype):
        numbers = series.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        numbers = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        # A value that was present but did not parse is a non-number; a missing one is reported below as missing.
        unparsed = np.isnan(numbers) & ~pd.isna(series).to_numpy()
        if unparsed.any():
            row = int(np.flatnonzero(unparsed)[0])
            raise InputError(f"{source}: column '{col}' row {row + 1}: value {series.iloc[row]!r} is not a number")
    bad = ~np.isfinite(numbers)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        what = "missing value (NaN)" if np.isnan(numbers[row]) else f"value {numbers[row]} is not finite"
        raise InputError(f"{source}: column '{col}' row {row + 1}: {what}")
    return numbers


def _labels(series: pd.Series, source: str) -> np.ndarray:
    """The label column as int64 0/1, or InputError at its first bad value."""
    numbers = _numeric_column(series, LABEL, source)
    bad = (numbers != 0) & (numbers != 1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{source}: column '{LABEL}' row {row + 1}: label {series.iloc[row]!r} is not 0 or 1")
    return numbers.astype(np.int64)


def _read_csv(path: Path, **options: Any) -> pd.DataFrame:
    # sep=None sniffs ',' / ';' / tab / whitespace from the first lines (needs the python engine) only for .txt/.tsv;
    # plain .csv uses the fast C parser.
    kwargs: dict[str, Any] = {"sep": None, "engine": "python"} if path.suffix.lower() != ".csv" else {}
    kwargs.update(options)
    try:
        df = pd.read_csv(path, **kwargs)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read as CSV: {_one_line(exc)}") from None
    if df.shape[1] == 0:
        raise InputError(f"{path}: the file has no columns")
    return df


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError(f"{path}: reading Parquet needs pyarrow (pip install 'mscred[parquet]')") from None
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid/OSError family for damaged files
        raise InputError(f"{path}: cannot read as Parquet: {_one_line(exc)}") from None
    if df.shape[1] == 0:
        raise InputError(f"{path}: the table has no columns")
    return df  # a stored non-default index (e.g. timestamps) stays the index: table_from_frame keeps it


def _read_npy(path: Path) -> pd.DataFrame:
    try:
        array = np.load(path, allow_pickle=False)  # never unpickle user files
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read as .npy: {_one_line(exc)}") from None
    if array.dtype.names:  # structured array: its fields are the columns
        return pd.DataFrame({name: array[name] for name in array.dtype.names})
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise InputError(f"{path}: expected a 2-D array (T, n), got shape {array.shape}")
    if array.shape[1] == 0:
        raise InputError(f"{path}: the array has no columns")
    return pd.DataFrame(array, columns=[f"sensor_{j}" for j in range(array.shape[1])])


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class Normalizer:
    """Per-sensor min-max scaling fitted on training data: ``(x - min) / (max - min)``.

    A constant sensor (max == min) gets scale 1, so it maps to 0 on the training data and never to NaN.

    Attributes
    ----------
    min_ : np.ndarray, float64, shape (n,)
    scale_ : np.ndarray, float64, shape (n,)
        ``max - min``, or 1 where that is 0.
    """

    def __init__(self, min_: Optional[np.ndarray] = None, scale_: Optional[np.ndarray] = None):
        self.min_ = None if min_ is None else np.asarray(min_, dtype=np.float64)
        self.scale_ = None if scale_ is None else np.asarray(scale_, dtype=np.float64)

    def fit(self, values) -> "Normalizer":
        """Fit on training values (T, n); returns self."""
        values = self._as_2d(values)
        if values.shape[0] == 0:
            raise InputError("cannot fit the normaliser on an empty table")
        self.min_ = values.min(axis=0)
        span = values.max(axis=0) - self.min_
        self.scale_ = np.where(span > 0, span, 1.0)
        return self

    def transform(self, values) -> np.ndarray:
        """Scale values (T, n) with the fitted statistics; returns float64 (T, n)."""
        if self.min_ is None:
            raise RuntimeError("Normalizer.transform called before fit")
        values = self._as_2d(values)
        if values.shape[1] != self.min_.shape[0]:
            raise InputError(f"expected {self.min_.shape[0]} sensors, got {values.shape[1]}")
        return (values - self.min_) / self.scale_

    def fit_transform(self, values) -> np.ndarray:
        return self.fit(values).transform(values)

    def to_dict(self) -> dict[str, list[float]]:
        """JSON-able statistics: ``{"min": [...], "scale": [...]}``."""
        if self.min_ is None:
            raise RuntimeError("Normalizer.to_dict called before fit")
        return {"min": [float(v) for v in self.min_], "scale": [float(v) for v in self.scale_]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Normalizer":
        """Rebuild from :meth:`to_dict`; a damaged dict raises InputError."""
        try:
            lo = np.asarray(data["min"], dtype=np.float64)
            scale = np.asarray(data["scale"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"normalisation statistics are damaged: {_one_line(exc)}") from None
        if lo.ndim != 1 or lo.shape != scale.shape:
            raise InputError(f"normalisation statistics are damaged: min {lo.shape} vs scale {scale.shape}")
        if not (np.isfinite(lo).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise InputError("normalisation statistics are damaged: non-finite min or non-positive scale")
        return cls(lo, scale)

    @staticmethod
    def _as_2d(values) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"values must have shape (T, n), got {values.shape}")
        return values
