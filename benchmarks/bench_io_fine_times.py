"""How long ``load_table`` takes on a CSV whose ``timestamp`` column is finer than float64, before and after a change
of io.py.

Epoch seconds written to the nanosecond (``1700000000.000000001``) read as float64 tie in runs of about 240 rows
(float64's step near 1.7e9 s is 2.4e-7 s). ``_check_time_order`` decides those ties on the exact text; it did so
with two ``Decimal``s a row in a Python loop. This script writes one CSV of ``--rows`` rows x ``--sensors`` sensors
(values ``%.5f``) per kind of ``timestamp`` column, then times ``load_table`` (what ``mscred train`` and ``mscred
detect`` read a table with) on each, ``--repeats`` times, alternating "before" (``git show REV:src/mscred/data/io.py``,
imported under another name) and "after" (the working tree), with a plain ``pandas.read_csv`` as the floor, and the
order check alone (``_check_time_order`` on the column's text). Kinds:

- ``fine``: steps of 1e-9 s from 1700000000 (``1700000000.000000001``, 20 characters each: every row ties with its
  neighbour in float64 but about one in 240);
- ``fine-irregular``: random steps of 1 to 400 ns, the fraction's trailing zeros dropped (``1700000000.00000012``,
  ``1700000000.0000002``: texts of 12 to 20 characters; most rows tie, some do not);
- ``fine-exp``: ``fine`` written with an exponent (``1.700000000000000001e9``: the keys' slower path).

Before timing, each kind's table is loaded by every version and compared (values, sensors, index and its dtype,
gap note), and a copy of its times with two rows swapped and one repeated (``table_from_frame``) must give every
version the same error message. Other processes may share the machine: the script prints ``uptime`` before and after.

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_io_fine_times.py [--rows 1000000] [--sensors 10] [--repeats 3]
        [--work DIR] [--before HEAD] [--kinds fine fine-irregular fine-exp]
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench_io_timestamps import arguments, io_versions, same, start, timed

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("fine", "fine-irregular", "fine-exp")


def times_for(kind: str, rows: int) -> list[str]:
    if kind == "fine":
        ns = np.arange(rows)
        return [f"{1_700_000_000 + k // 10 ** 9}.{k % 10 ** 9:09d}" for k in ns.tolist()]
    if kind == "fine-irregular":
        ns = np.cumsum(np.random.default_rng(2).integers(1, 401, rows))
        return [f"{1_700_000_000 + k // 10 ** 9}.{f'{k % 10 ** 9:09d}'.rstrip('0') or '0'}" for k in ns.tolist()]
    if kind == "fine-exp":
        return [f"1.7{k // 10 ** 9:08d}{k % 10 ** 9:09d}e9" for k in range(rows)]
    raise ValueError(kind)


def write_csv(path: Path, times: list[str], sensors: int) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.standard_normal((len(times), sensors)), columns=[f"s{j}" for j in range(sensors)])
    frame.insert(0, "timestamp", times)
    frame.to_csv(path, index=False, float_format="%.5f")


def order_check(version):
    """The version's time-order check: ``_check_time_order`` until it was made public as ``check_time_order``."""
    return getattr(version, "check_time_order", None) or version._check_time_order


def message(version, frame: pd.DataFrame) -> str:
    try:
        version.table_from_frame(frame)
    except Exception as exc:   # (every version's error, whatever its class, is compared)
        return f"{type(exc).__name__}: {exc}"
    return "accepted"


def check_errors(versions: dict, times: list[str]) -> list[str]:
    """The messages of every version for ``times`` with rows 0.9n / 0.9n + 1 swapped, and with row 0.7n repeated
    (each on its own): they must be the same."""
    n = len(times)
    swapped = list(times)
    swapped[9 * n // 10], swapped[9 * n // 10 + 1] = swapped[9 * n // 10 + 1], swapped[9 * n // 10]
    repeated = list(times)
    repeated[7 * n // 10 + 1] = repeated[7 * n // 10]
    out = []
    for bad in (swapped, repeated):
        frame = pd.DataFrame({"timestamp": bad, "s0": np.zeros(n)})
        got = {name: message(v, frame) for name, v in versions.items()}
        if len(set(got.values())) != 1:
            raise SystemExit(f"versions differ: {got}")
        out.append(got["before"])
    return out


def main() -> None:
    args = arguments(__doc__, "bench_io_fine_times", KINDS).parse_args()

    versions = io_versions(args.before)
    start(args)
    names = list(versions)
    lines = ["| timestamp | read_csv alone | " + " | ".join(f"load_table {n} (runs)" for n in names)
             + " | after/before | " + " | ".join(f"CPU {n}" for n in names) + " | "
             + " | ".join(f"order check {n}" for n in names) + " |",
             "| --- " * (3 + 3 * len(names)) + "|"]
    for kind in args.kinds:
        times = times_for(kind, args.rows)
        for text in check_errors(versions, times):
            print(f"{kind}: {text}")
        path = args.work / f"{kind}_{args.rows}x{args.sensors}.csv"
        if not path.exists():
            write_csv(path, times, args.sensors)
        tables = {n: v.load_table(path) for n, v in versions.items()}   # (also warms the page cache)
        for n, table in tables.items():
            if not same(table, tables["before"]):
                raise SystemExit(f"{kind}: {n} reads {path} differently from before")
        if tables["before"].index.dtype == np.float64:
            raise SystemExit(f"{kind}: the times were read as float64, not kept as text: nothing to measure")
        index = tables["before"].index
        runs: dict[str, list[tuple[float, float]]] = {"read_csv": [], **{n: [] for n in names}}
        checks: dict[str, list[float]] = {n: [] for n in names}
        for _ in range(args.repeats):
            runs["read_csv"].append(timed(pd.read_csv, path))
            for n, version in versions.items():
                runs[n].append(timed(version.load_table, path))
                checks[n].append(timed(lambda i: order_check(version)(i, "bench"), index)[0])
        med = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        lines.append(f"| {kind} | {med['read_csv']:.3f} s | "
                     + " | ".join(f"{med[n]:.3f} s ({', '.join(f'{w:.2f}' for w, _ in runs[n])})" for n in names)
                     + f" | {med['after'] / med['before']:.2f} | " + " | ".join(f"{cpu[n]:.3f} s" for n in names)
                     + " | " + " | ".join(f"{statistics.median(checks[n]):.3f} s" for n in names) + " |")
        print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    print("\n" + "\n".join(comparison_alone(args)))
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def comparison_alone(args) -> list[str]:
    """The README's "comparison alone" table: the float64-tied pairs of each kind's texts (as object arrays) decided
    by the old Decimal loop (``_old_order``, the oracle of tests/test_io_fine_times.py) and by ``io._exact_order``,
    median of ``--repeats`` runs, the runs in brackets."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_io_fine_times import _old_order

    from mscred.data import io

    lines = ["| texts | tied pairs | old Decimal loop | `_exact_order` |", "| --- | --- | --- | --- |"]
    for kind in args.kinds:
        texts = np.array(times_for(kind, args.rows), dtype=object)
        keys = pd.to_numeric(pd.Series(texts)).to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~(keys[1:] > keys[:-1]))
        runs = {name: [] for name in ("old", "new")}
        for _ in range(args.repeats):
            for name, fn in (("old", _old_order), ("new", io._exact_order)):
                t0 = time.perf_counter()
                found = fn(texts, bad)[0]
                runs[name].append(time.perf_counter() - t0)
                if len(found):
                    raise SystemExit(f"{kind}: {name} found rows out of order in increasing times")
        lines.append(f"| {kind} | {len(bad):,} | " + " | ".join(
            f"{statistics.median(r):.2f} s ({', '.join(f'{w:.2f}' for w in r)})" for r in runs.values()) + " |")
        print(lines[-1], flush=True)
    return lines


if __name__ == "__main__":
    main()
