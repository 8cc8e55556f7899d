"""How long ``io._nearest_floats`` takes on a million timestamp texts, before and after a change of io.py.

pandas before 3.1 reads some 17-digit decimals a unit in the last place off (``io.pandas_rounds_floats``), so io.py
replaces its reading of a number-as-text timestamp column with Python's nearest float64 of each text
(``_nearest_floats``): in a loop of ``float`` calls before, with pyarrow's cast of the plain decimal texts after. This
script times that function alone on ``--rows`` texts of each kind, ``--repeats`` times, alternating "before" (``git
show REV:src/mscred/data/io.py``, imported under another name) and "after" (the working tree); then, where the
installed pandas is one that needs it (before 3.1: run with pandas 3.0.6 on the path, see below), ``load_table`` of
a CSV of those times and ``--sensors`` sensors (values ``%.5f``), where the function is called once (twice for
``fine``: the column stays text, and the order check reads it again). Kinds of text:

- ``float-us``: epoch seconds at irregular steps of about 1 ms as Python writes them (``1700000000.0010633``, 16 to
  17 significant digits, as ``time.time()`` gives them): the case pandas 3.0 reads a unit off;
- ``fine``: epoch seconds to the nanosecond (``1700000000.000000001``, 19 digits);
- ``padded``: ``float-us`` with a blank before and after, as spreadsheet exports pad cells.

Last, the other vectorised readings considered, on the ``float-us`` texts alone (``alternatives``): numpy's casts
of the texts to float64 (from the object array; from numpy 2's StringDType, stripped) and ``np.fromstring`` of the
texts joined by commas, each checked against ``float`` first.

Before timing, both versions' results must equal ``float(text.strip())`` of every text, bit for bit, and both
versions' tables must be the same. Other processes may share the machine: the script prints ``uptime`` before and
after.

Usage (pandas 3.0.6 beside the venv: ``.venv/bin/pip install --no-deps --target /tmp/pd306 pandas==3.0.6``)::

    PYTHONPATH=/tmp/pd306:src .venv/bin/python benchmarks/bench_io_nearest_floats.py [--rows 1000000]
        [--sensors 10] [--repeats 5] [--work DIR] [--before HEAD] [--kinds float-us fine padded]
"""
from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench_io_timestamps import arguments, io_versions, same, start, timed

KINDS = ("float-us", "fine", "padded")


def texts_for(kind: str, rows: int) -> np.ndarray:
    if kind in ("float-us", "padded"):
        seconds = 1_700_000_000 + np.cumsum(np.random.default_rng(1).uniform(0.0009, 0.0011, rows))
        pad = " " if kind == "padded" else ""
        return np.array([f"{pad}{t!r}{pad}" for t in seconds.tolist()], dtype=object)
    if kind == "fine":
        return np.array([f"{1_700_000_000 + k // 10 ** 9}.{k % 10 ** 9:09d}" for k in range(rows)], dtype=object)
    raise ValueError(kind)


def write_csv(path: Path, texts: np.ndarray, sensors: int) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.standard_normal((len(texts), sensors)), columns=[f"s{j}" for j in range(sensors)])
    frame.insert(0, "timestamp", texts)
    frame.to_csv(path, index=False, float_format="%.5f")


def runs_text(runs: list[float]) -> str:
    return f"{statistics.median(runs):.3f} s ({', '.join(f'{w:.3f}' for w in runs)})"


def main() -> None:
    parser = arguments(__doc__, "bench_io_nearest_floats", KINDS)
    parser.set_defaults(repeats=5)   # (the function alone takes under a second: more runs than the io benchmarks)
    args = parser.parse_args()
    versions = io_versions(args.before)
    start(args)
    needed = not versions["after"].pandas_rounds_floats()
    print(f"pandas {pd.__version__} {'does not read' if needed else 'reads'} every decimal as its nearest float64: "
          f"load_table {'calls' if needed else 'does not call'} _nearest_floats\n")
    alone = ["| texts | differ from pandas' reading | before (runs) | after (runs) | after/before |",
             "| --- | --- | --- | --- | --- |"]
    tables = ["| texts | read_csv alone | load_table before (runs) | load_table after (runs) | after/before |"
              " CPU before | CPU after |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for kind in args.kinds:
        texts = texts_for(kind, args.rows)
        numbers = pd.to_numeric(pd.Series(texts)).to_numpy(dtype=np.float64)    # pandas' reading
        want = np.array([float(t.strip()) for t in texts.tolist()]).view(np.uint64)
        for name, version in versions.items():
            if not np.array_equal(version._nearest_floats(texts, numbers).view(np.uint64), want):
                raise SystemExit(f"{kind}: {name}'s _nearest_floats is not float(text) of every text")
        runs: dict[str, list[float]] = {name: [] for name in versions}
        for _ in range(args.repeats):
            for name, version in versions.items():
                t0 = time.perf_counter()
                version._nearest_floats(texts, numbers)
                runs[name].append(time.perf_counter() - t0)
        off = int((numbers.view(np.uint64) != want).sum())
        ratio = statistics.median(runs["after"]) / statistics.median(runs["before"])
        alone.append(f"| {kind} | {off:,} | {runs_text(runs['before'])} | {runs_text(runs['after'])} | {ratio:.2f} |")
        print(alone[-1], flush=True)
        if needed:
            tables.append(load_tables(args, kind, texts, versions))
            print(tables[-1], flush=True)
    print("\n`_nearest_floats` alone, median (runs):\n\n" + "\n".join(alone))
    if needed:
        print("\n`load_table`, median (runs):\n\n" + "\n".join(tables))
    print("\nOther ways to read the float-us texts at once, median (runs):\n\n" + "\n".join(alternatives(args)))
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def alternatives(args) -> list[str]:
    """The table of other vectorised readings of the ``float-us`` texts (as object arrays: what io.py has), each
    first checked against ``float`` bit for bit."""
    texts = texts_for("float-us", args.rows)
    want = np.array([float(t) for t in texts.tolist()]).view(np.uint64)
    ways = {"`float()` in a list comprehension": lambda: np.array([float(t) for t in texts.tolist()]),
            "numpy cast object -> float64": lambda: texts.astype(np.float64),
            "`np.fromstring(','.join(texts), sep=',')`": lambda: np.fromstring(",".join(texts.tolist()), sep=",")}
    if hasattr(np, "strings"):   # (numpy 2)
        strings = np.dtypes.StringDType()
        ways["numpy StringDType, `np.strings.strip`, cast"] = lambda: np.strings.strip(texts.astype(strings)).astype(
            np.float64)
    lines = ["| way | time (runs) |", "| --- | --- |"]
    for name, way in ways.items():
        if not np.array_equal(way().view(np.uint64), want):
            raise SystemExit(f"{name} does not read the texts as float() does")
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            way()
            runs.append(time.perf_counter() - t0)
        lines.append(f"| {name} | {runs_text(runs)} |")
        print(lines[-1], flush=True)
    return lines


def load_tables(args, kind: str, texts: np.ndarray, versions: dict) -> str:
    """The table row of ``load_table`` on a CSV of ``texts`` (written once into ``--work``), both versions."""
    path = args.work / f"{kind}_{args.rows}x{args.sensors}.csv"
    if not path.exists():
        write_csv(path, texts, args.sensors)
    loaded = {name: version.load_table(path) for name, version in versions.items()}   # (also warms the page cache)
    if not same(loaded["after"], loaded["before"]):
        raise SystemExit(f"{kind}: after reads {path} differently from before")
    runs: dict[str, list[tuple[float, float]]] = {"read_csv": [], **{name: [] for name in versions}}
    for _ in range(max(3, args.repeats // 2)):
        runs["read_csv"].append(timed(pd.read_csv, path))
        for name, version in versions.items():
            runs[name].append(timed(version.load_table, path))
    med = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    walls = {k: ", ".join(f"{w:.2f}" for w, _ in v) for k, v in runs.items()}
    return (f"| {kind} | {med['read_csv']:.3f} s | {med['before']:.3f} s ({walls['before']}) | {med['after']:.3f} s "
            f"({walls['after']}) | {med['after'] / med['before']:.2f} | {cpu['before']:.3f} s | {cpu['after']:.3f} s |")


if __name__ == "__main__":
    main()
