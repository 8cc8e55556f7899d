"""Differential check of io.py's float-timestamp handling: REV's io.py (default HEAD) against the working tree's on
generated CSVs with odd 'timestamp' columns (floats written as repr, to fixed digits or finer than float64, ints,
int blocks among floats, empty / NA / comment / date / bool cells, padding, exponents, huge integers), in the C
reader (.csv, .csv.gz), the sniffed python reader (.txt blank-separated, .tsv, ';'-separated .csv) and with
evaluate's options (keep_default_na=False, na_values=['']). For each file: read_frame (dtype, values bit for bit,
the type of every cell) and load_table (the table, or the error line) must be the same.

    PYTHONPATH=src python benchmarks/results/io_timestamps/diff_check.py [--seed 0] [--files 300] [--large]

``--large`` adds files of 20,000 rows (a changed time at the check's block edges) and 200,000 rows (pandas'
parallel reader and its 65,536-row type-inference blocks). Prints each difference and a count.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import random
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "src"))
from mscred.data import io as new  # noqa: E402
from mscred.errors import InputError  # noqa: E402

ODD = ["", "NA", "nan", "NaN", "None", "x", "# c", "2024-01-01", "1.7e9", "1.7E+09", "inf", "-inf", "Infinity",
       " 1.5", "1.5 ", "+1.5", "0001.5", "9007199254740993", "90071992547409930", "18446744073709551617",
       "12345678901234567.5", "1_0.5", "True", "1,5", "-0.0", ".5", "5.", "1e400", "1e-400", "0x10", "1.5.2",
       "1700000000.00000000000000001", "17000000000000000000", "1700000000000000000", "1.7000000000000001e9",
       "#N/A", "-1.#IND", "1.5e", "e5", "  ", "null", "<NA>"]


def load_old(rev: str):
    text = subprocess.run(["git", "show", f"{rev}:src/mscred/data/io.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "io_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("io_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["io_old"] = module
    spec.loader.exec_module(module)
    return module


def random_column(rng: random.Random, n: int) -> list[str]:
    base = rng.choice([0, 1_700_000_000, 1_700_000_000_000, 1_700_000_000_000_000, 10 ** 15])
    kinds = rng.choice([["float"], ["fine"], ["int"], ["repr"], ["float", "int"], ["int", "float"], ["fine", "int"]])
    tokens = []
    for i in range(n):
        kind = kinds[0] if len(kinds) == 1 or i < n // 2 else kinds[1]
        if kind == "float":
            tokens.append(f"{base + i * 0.01 + rng.random() * 1e-3:.{rng.choice([1, 2, 3, 6, 7, 9, 12])}f}")
        elif kind == "fine":
            tokens.append(f"{base}.{i:0{rng.choice([7, 8, 10])}d}")
        elif kind == "int":
            tokens.append(str(base + i))
        else:
            tokens.append(repr(base + 0.001 * i))
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        tokens[rng.randrange(n)] = rng.choice(ODD)
    if rng.random() < 0.15 and n > 3:
        j = rng.randrange(n - 1)
        tokens[j], tokens[j + 1] = tokens[j + 1], tokens[j]
    if rng.random() < 0.1:
        tokens[rng.randrange(n)] = tokens[0]
    return tokens


def write(path: Path, tokens: list[str], sep: str = ",", sensors: int = 2) -> None:
    lines = [sep.join(["timestamp"] + [f"s{j}" for j in range(sensors)])]
    for i, t in enumerate(tokens):
        if sep == " " and (t.strip() == "" or " " in t):
            t = "x"
        if sep == "," and "," in t:
            t = f'"{t}"'
        lines.append(sep.join([t] + [f"{(i * 7 + j) % 11 * 0.5:.1f}" for j in range(sensors)]))
    data = "\n".join(lines) + "\n"
    path.write_bytes(gzip.compress(data.encode())) if path.suffix == ".gz" else path.write_text(data)


def outcome(module, fn: str, path: Path, **kw):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", getattr(module, fn)(path, **kw)
    except InputError as err:
        return "err", str(err)


def same_frame(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or a.dtypes.to_dict() != b.dtypes.to_dict():
        return False
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if x.dtype.kind == "f":
            if not (np.array_equal(x, y, equal_nan=True) and np.array_equal(np.signbit(x), np.signbit(y))):
                return False
        elif [type(v) for v in x] != [type(v) for v in y] or not all(
                u is v or u == v or (pd.isna(u) and pd.isna(v)) for u, v in zip(x, y)):
            return False
    return True


def same_table(a, b) -> bool:
    return (np.array_equal(a.values, b.values) and a.sensors == b.sensors and a.index.dtype == b.index.dtype
            and a.index.equals(b.index) and getattr(a, "time_gap", None) == getattr(b, "time_gap", None)
            and [type(v) for v in a.index[:50]] == [type(v) for v in b.index[:50]])


def compare(old, path: Path, calls) -> int:
    differences = 0
    for fn, kw in calls:
        a, b = outcome(old, fn, path, **kw), outcome(new, fn, path, **kw)
        ok = a[0] == b[0] and (a[1] == b[1] if a[0] == "err" else
                               same_frame(a[1], b[1]) if fn == "read_frame" else same_table(a[1], b[1]))
        if not ok:
            differences += 1
            print("DIFFERENT", path.name, fn, kw, "\n  old:", str(a[1])[:300], "\n  new:", str(b[1])[:300])
    return differences


def large_cases() -> dict[str, list[str]]:
    cases = {}
    rows = 20_000
    seconds = (1_700_000_000 + 0.001 * np.arange(rows)).tolist()
    for at in (0, 1023, 1024, 9215, 9216, 15000, rows - 1):
        for name, fmt in (("repr", repr), ("fixed", lambda v: f"{v:.6f}")):
            tokens = [fmt(v) for v in seconds]
            tokens[at] = f"{seconds[at]:.7f}1"
            cases[f"{name}-changed-at-{at}"] = tokens
    cases["fixed"] = [f"{v:.6f}" for v in seconds]
    cases["padded"] = [f" {v!r} " for v in seconds]
    rows = 200_000
    seconds = (1_700_000_000 + 0.001 * np.arange(rows)).tolist()
    reprs = [repr(v) for v in seconds]
    fine = [f"{1_700_000_000 + k // 10 ** 7}.{k % 10 ** 7:07d}" for k in range(rows)]
    cases["float"], cases["fine"] = reprs, fine
    cases["float-int-block"] = reprs[:1000] + [str(1_700_000_000 + i) for i in range(100_000)] + reprs[101_000:]
    cases["float-bigint-block"] = reprs[:1000] + [str(10 ** 17 + 7 * i) for i in range(100_000)] + reprs[101_000:]
    for name, column, at, cell in (("comment", reprs, 150_000, "# maintenance"), ("fine-empty", fine, 120_000, ""),
                                   ("fine-NA", fine, 120_000, "NA"), ("float-empty", reprs, 5, ""),
                                   ("bools", reprs, 100_000, "True")):
        cases[name] = column[:at] + [cell] + column[at + 1:]
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--large", action="store_true")
    args = parser.parse_args()
    old = load_old(args.rev)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp())
    calls = (("read_frame", {}), ("read_frame", {"keep_default_na": False, "na_values": [""]}), ("load_table", {}))
    count = differences = 0
    for case in range(args.files):
        tokens = random_column(rng, rng.choice([1, 2, 5, 30, 250, 1500]))
        suffix = rng.choice([".csv", ".csv", ".csv", ".txt", ".tsv", ".csv.gz", "_semi.csv"])
        path = work / f"c{case}{suffix}"
        write(path, tokens, sep={".txt": " ", ".tsv": "\t", "_semi.csv": ";"}.get(suffix, ","))
        differences += compare(old, path, calls)
        count += len(calls)
    if args.large:
        for name, tokens in large_cases().items():
            for suffix, sep in ((".csv", ","), (".txt", " ")):
                path = work / f"{name}{suffix}"
                write(path, tokens, sep=sep, sensors=3)
                differences += compare(old, path, calls[::2])
                count += 2
    print(f"{count} comparisons, {differences} differences")


if __name__ == "__main__":
    main()
