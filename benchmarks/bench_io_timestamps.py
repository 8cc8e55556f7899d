"""How long ``load_table`` takes on a large CSV by kind of ``timestamp`` column, before and after a change of io.py.

A float ``timestamp`` column (epoch seconds with fractions) was read twice: once by the table's ``read_csv``, once
more as text alone (``_exact_times``) to keep times finer than float64 as written. This script writes one CSV of
``--rows`` rows x ``--sensors`` sensors (values ``%.5f``) per kind of timestamp column, then times ``load_table``
on each, ``--repeats`` times, alternating "before" (``git show REV:src/mscred/data/io.py``, imported under another
name) and "after" (the working tree), and a plain ``pandas.read_csv`` of the file as the floor. Kinds:

- ``float``: epoch seconds in ms steps as pandas writes float64 (``1700000000.001``; read back as float64);
- ``float-us``: epoch seconds at irregular steps of about 1 ms, as pandas writes float64 (``1700000000.0010633``, 16
  to 17 digits, as ``time.time()`` gives them; read back as float64: each text is its float's shortest repr);
- ``float-fine``: epoch seconds to 1e-7 s (``1700000000.0000001``): finer than float64, kept as text;
- ``int``: epoch nanoseconds (int64);
- ``iso``: ISO 8601 text with milliseconds (``2024-01-01 00:00:00.001``).

Before timing, each kind's table is loaded by every version and compared (values, sensors, index and its dtype).
``--also FILE.py`` adds other versions of io.py to time (e.g. one that reads the table once with the timestamp
column as text: see benchmarks/results/io_timestamps/README.md). Other processes may share the machine: the script
prints ``uptime`` before and after.

Usage::

    PYTHONPATH=src python benchmarks/bench_io_timestamps.py [--rows 1000000] [--sensors 10] [--repeats 3]
        [--work DIR] [--before HEAD] [--also FILE.py ...] [--kinds float float-us float-fine int iso]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("float", "float-us", "float-fine", "int", "iso")


def times_for(kind: str, rows: int) -> np.ndarray:
    i = np.arange(rows)
    if kind == "float":
        return np.array([repr(v) for v in (1_700_000_000 + 0.001 * i).tolist()], dtype=object)
    if kind == "float-us":
        steps = np.random.default_rng(1).uniform(0.0009, 0.0011, rows)
        return np.array([repr(v) for v in (1_700_000_000 + np.cumsum(steps)).tolist()], dtype=object)
    if kind == "float-fine":
        return np.array([f"{1_700_000_000 + k // 10 ** 7}.{k % 10 ** 7:07d}" for k in i.tolist()], dtype=object)
    if kind == "int":
        return (1_700_000_000_000_000_000 + 1_000_000 * i).astype(np.int64)
    if kind == "iso":
        return pd.date_range("2024-01-01", periods=rows, freq="ms").strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3]
    raise ValueError(kind)


def write_csv(path: Path, kind: str, rows: int, sensors: int) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.standard_normal((rows, sensors)), columns=[f"s{j}" for j in range(sensors)])
    frame.insert(0, "timestamp", times_for(kind, rows))
    frame.to_csv(path, index=False, float_format="%.5f")


def load_version(name: str, text: str):
    """io.py's ``text`` imported as its own module (its imports of mscred.config/errors are the tree's)."""
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def io_versions(before: str, also=()) -> dict:
    """The io modules to time: "before" (``src/mscred/data/io.py`` at git revision ``before``, imported under another
    name), "after" (the working tree's), and each extra io.py file of ``also`` under its file name."""
    sys.path.insert(0, str(ROOT / "src"))
    from mscred.data import io as after

    head = subprocess.run(["git", "show", f"{before}:src/mscred/data/io.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    versions = {"before": load_version("io_before", head), "after": after}
    for path in also:
        versions[path.stem] = load_version(f"io_{path.stem}", path.read_text())
    return versions


def same(a, b) -> bool:
    return (np.array_equal(a.values, b.values) and a.sensors == b.sensors and a.index.dtype == b.index.dtype
            and a.index.equals(b.index) and a.time_gap == b.time_gap)


def timed(fn, path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``fn(path)``; the process's CPU time (every thread: pandas reads a large CSV in
    several) moves less than the wall time when other processes share the cores."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn(path)
    return time.perf_counter() - t0, time.process_time() - c0


def arguments(doc: str, work: str, kinds: tuple[str, ...]) -> argparse.ArgumentParser:
    """The io benchmarks' common options: table size, repeats, the CSVs' folder, the 'before' revision, the kinds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sensors", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / work)
    parser.add_argument("--before", default="HEAD", help="git revision of the 'before' io.py")
    parser.add_argument("--kinds", nargs="+", choices=kinds, default=list(kinds))
    return parser


def start(args) -> None:
    """The CSVs' folder made, and the header every run prints: the load (the 2 cores are often shared) and versions."""
    args.work.mkdir(parents=True, exist_ok=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"pandas {pd.__version__}, numpy {np.__version__}, Python {sys.version.split()[0]}; "
          f"{args.rows:,} rows x {args.sensors} sensors; median of {args.repeats} runs (wall, and CPU: process time)"
          "\n")


def main() -> None:
    parser = arguments(__doc__, "bench_io_timestamps", KINDS)
    parser.add_argument("--also", nargs="*", type=Path, default=[], help="other io.py versions to time")
    args = parser.parse_args()

    versions = io_versions(args.before, args.also)
    start(args)
    names = list(versions)
    lines = ["| timestamp | index dtype | read_csv alone | " + " | ".join(f"load_table {n} (runs)" for n in names)
             + " | after/before | " + " | ".join(f"CPU {n}" for n in names) + " |",
             "| --- " * (4 + 2 * len(names)) + "|"]
    for kind in args.kinds:
        path = args.work / f"{kind}_{args.rows}x{args.sensors}.csv"
        if not path.exists():
            write_csv(path, kind, args.rows, args.sensors)
        tables = {n: v.load_table(path) for n, v in versions.items()}   # (also warms the page cache)
        for n, table in tables.items():
            if not same(table, tables["before"]):
                raise SystemExit(f"{kind}: {n} reads {path} differently from before")
        runs: dict[str, list[tuple[float, float]]] = {"read_csv": [], **{n: [] for n in names}}
        for _ in range(args.repeats):
            runs["read_csv"].append(timed(pd.read_csv, path))
            for n, version in versions.items():
                runs[n].append(timed(version.load_table, path))
        med = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        lines.append(f"| {kind} | {tables['before'].index.dtype} | {med['read_csv']:.3f} s | "
                     + " | ".join(f"{med[n]:.3f} s ({', '.join(f'{w:.2f}' for w, _ in runs[n])})" for n in names)
                     + f" | {med['after'] / med['before']:.2f} | " + " | ".join(f"{cpu[n]:.3f} s" for n in names)
                     + " |")
        print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
