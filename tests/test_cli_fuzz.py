"""Random mutations of good input files through the CLI never end in an internal error: every run exits 0, or 2
with one ``mscred: error:`` line and no traceback (SPEC "Bad input").

Seeded, so a failure reproduces (its case number, mutations and input file are in the assertion). The mutations
are those of the session that found three internal errors this way (2026-12-04: a column of integers past
float64's range, a Parquet timestamp column or index of lists, float16 timestamps; each has its own case in
test_cli_messy.py): field edits with awkward tokens, dropped / repeated / swapped / blank lines, header edits,
truncation, other encodings for CSV; other dtypes of a column or the index for Parquet; both inputs of
``evaluate``; a damaged model's config.json at ``detect``. Commands run in-process (``mscred.cli.main.main``), as
test_cli_messy.py's.
"""
from __future__ import annotations

import datetime
import decimal
import json
import os
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_helpers import run_cli, sensor_frame, tiny_model

ROWS, N = 200, 5
TOKENS = ["", " ", "nan", "NaN", "inf", "-inf", "1e309", "1e-320", "abc", '"', '""', ";", "\t", "\x00", "1,5",
          "0x10", "True", "None", "null", "2020-01-01", "1.2.3", "--1", "+", "1e", "٣", "１２", "\ufeff", "9" * 400,
          "-" + "9" * 400, "-0", "1_000", "∞", "\r", "'", "NA", "#", "1 2"]
HEADER_NAMES = ["s0", "", "timestamp", "label", "s9", " s1", "S1", "x" * 300, "s1;s2"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("fuzz_model") / "model", sensor_frame(ROWS, N))


def _outcome(capsys, argv: list) -> str:
    """'' when ``mscred ARGV`` kept the contract, else what it did (exit code and stderr)."""
    try:
        code, _, err = run_cli(capsys, *argv)
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - anything escaping main (it returns its code) is a finding
        code, err = f"{type(exc).__name__}: {exc}", capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("note:")]  # notes about the data may precede
    if code == 0 or (code == 2 and len(lines) == 1 and lines[0].startswith("mscred: error:")):
        return "" if "Traceback" not in err else f"exit {code} with a traceback: {err[-1500:]}"
    return f"exit {code}: {err[-1500:]}"


def _mutated_csv(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """``text`` with 1-4 random edits, and their names."""
    lines, done = text.split("\n"), []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["field", "drop field", "add field", "repeat line", "delete line", "truncate", "swap",
                           "header", "garbage", "column", "blank line"])
        i = rng.randrange(len(lines))
        fields = lines[i].split(",")
        if kind == "field":
            fields[rng.randrange(len(fields))] = rng.choice(TOKENS)
        elif kind == "drop field":
            fields.pop(rng.randrange(len(fields)))
        elif kind == "add field":
            fields.insert(rng.randrange(len(fields) + 1), rng.choice(TOKENS))
        elif kind == "header":
            fields = lines[0].split(",")
            fields[rng.randrange(len(fields))] = rng.choice(HEADER_NAMES)
            i = 0
        elif kind == "garbage":
            cut = rng.randrange(len(lines[i]) + 1)
            fields = [lines[i][:cut] + rng.choice(TOKENS) + lines[i][cut:]]
        if kind in ("field", "drop field", "add field", "header", "garbage"):
            lines[i] = ",".join(fields)
        elif kind == "repeat line":
            lines.insert(i, lines[i])
        elif kind == "delete line" and len(lines) > 1:
            lines.pop(i)
        elif kind == "truncate":
            lines = lines[:rng.randrange(1, len(lines) + 1)]
        elif kind == "swap":
            k = rng.randrange(len(lines))
            lines[i], lines[k] = lines[k], lines[i]
        elif kind == "column":
            j, token = rng.randrange(N + 1), rng.choice(TOKENS)
            lines = [",".join(token if (c == j and r > 0) else v for c, v in enumerate(line.split(",")))
                     for r, line in enumerate(lines)]
        elif kind == "blank line":
            lines.insert(i, "")
        done.append(kind)
    return "\n".join(lines), done


def _write_csv(path: Path, text: str, rng: random.Random) -> str:
    encoding = rng.choice(["utf-8", "utf-8", "utf-8", "utf-16", "latin-1"])
    path.write_bytes(text.encode(encoding, errors="replace"))
    return encoding


def test_csv_mutations_through_detect_and_train(tmp_path, capsys, model_dir):
    rng = random.Random(20261204)
    good = sensor_frame(ROWS, N).to_csv(index=False)
    findings = []
    for case in range(160):
        text, edits = _mutated_csv(good, rng)
        path = tmp_path / f"case_{case}.csv"
        encoding = _write_csv(path, text, rng)
        if case % 8 == 7:
            argv = ["train", path, "--out", tmp_path / f"m{case}", "--epochs", 1, "--device", "cpu", "--quiet"]
        else:
            argv = ["detect", model_dir, path, "--out", tmp_path / f"s{case}.csv", "--device", "cpu",
                    "--missing", rng.choice(["error", "interpolate"])]
        found = _outcome(capsys, argv)
        if found:
            findings.append(f"case {case} ({argv[0]}, {encoding}, {edits}, {path}): {found}")
    assert not findings, "\n".join(findings)


def test_decimal_comma_and_stdin_mutations(tmp_path, capsys, model_dir, monkeypatch):
    """The same edits to a European export (';' between fields, ',' in the numbers: the edits made on the plain
    text, then its separators and points turned), through detect as a file and, every third case, from standard
    input to standard output: exit 0, or 2 with one line and nothing on stdout -- never a traceback."""
    import io
    import sys

    rng = random.Random(20261205)
    good = sensor_frame(ROWS, N).to_csv(index=False)
    findings, codes = [], set()
    for case in range(60):
        text, edits = _mutated_csv(good, rng)
        text = text.replace(",", ";").replace(".", ",")
        path = tmp_path / f"excel_{case}.csv"
        encoding = _write_csv(path, text, rng)
        if case % 3 == 2:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
            argv = ["detect", model_dir, "-", "--out", "-", "--device", "cpu"]
            code, out, err = run_cli(capsys, *argv)
            if code != 0 and out:
                findings.append(f"case {case} (stdin, {encoding}, {edits}): exit {code} with stdout {out[:200]!r}")
            found = "" if code == 0 or (code == 2 and len(err.splitlines()) == 1) else f"exit {code}: {err[-800:]}"
        else:
            argv = ["detect", model_dir, path, "--out", tmp_path / f"s{case}.csv", "--device", "cpu"]
            found = _outcome(capsys, argv)
            code = 0 if (tmp_path / f"s{case}.csv").exists() else 2
        if found:
            findings.append(f"case {case} ({argv[2]}, {encoding}, {edits}): {found}")
        codes.add(code)
    assert not findings, "\n".join(findings)
    assert codes == {0, 2}, codes   # (both outcomes met: cases that score and cases refused)


def _converted(column: pd.Series, kind: str, rng: random.Random) -> pd.Series:
    n = len(column)
    pick = rng.randrange(n)
    if kind == "category":
        return column.astype("category")
    if kind == "decimal":
        return column.map(lambda v: decimal.Decimal(str(round(float(v), 6))))
    if kind == "bytes":
        return column.map(lambda v: str(v).encode())
    if kind == "lists":
        return column.map(lambda v: [v, v])
    if kind == "dicts":
        return column.map(lambda v: {"a": v})
    if kind == "dates":
        return pd.Series(pd.to_datetime(np.arange(n), unit="s"), index=column.index)
    if kind == "zoned dates":
        return pd.Series(pd.to_datetime(np.arange(n), unit="s").tz_localize("UTC"), index=column.index)
    if kind == "durations":
        return pd.Series(pd.to_timedelta(np.arange(n), unit="s"), index=column.index)
    if kind == "dates as objects":
        return pd.Series([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(n)],
                         index=column.index)
    if kind == "float16":
        return column.astype(np.float16)
    if kind == "nullable ints with NA":
        ints = (column.astype(float) * 100).round().astype("Int64")
        ints.iloc[pick] = pd.NA
        return ints
    if kind == "bool":
        return column.astype(float) > 0
    if kind == "string dtype":
        return column.astype(str).astype("string")
    if kind == "uint64":
        return pd.Series(np.arange(n, dtype=np.uint64) * np.uint64(2 ** 62), index=column.index)
    if kind == "one text cell":
        column = column.astype(object)
        column.iloc[pick] = "x"
        return column
    if kind == "one None":
        column = column.astype(object)
        column.iloc[pick] = None
        return column
    if kind == "one inf":
        column = column.astype(float)
        column.iloc[pick] = np.inf
        return column
    if kind == "constant":
        return column * 0 + 1.0
    return column


PARQUET_KINDS = ["category", "decimal", "bytes", "lists", "dicts", "dates", "zoned dates", "durations",
                 "dates as objects", "float16", "nullable ints with NA", "bool", "string dtype", "uint64",
                 "one text cell", "one None", "one inf", "constant"]


def test_parquet_dtypes_through_detect_and_train(tmp_path, capsys, model_dir):
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    rng = random.Random(41)
    findings = []
    for case in range(120):
        frame, edits = sensor_frame(ROWS, N), []
        for _ in range(rng.randint(1, 2)):
            column, kind = rng.choice(list(frame.columns)), rng.choice(PARQUET_KINDS)
            try:
                frame[column] = _converted(frame[column], kind, rng)
            except (TypeError, ValueError, ArithmeticError, NotImplementedError):  # a conversion that does not apply
                continue  # to a column an earlier one made (arithmetic on text)
            edits.append(f"{column}: {kind}")
        if rng.random() < 0.3:
            frame = frame.set_index("timestamp")
            edits.append("timestamp as the index")
        path = tmp_path / f"case_{case}.parquet"
        try:
            frame.to_parquet(path)
        except Exception:  # noqa: BLE001 - a frame pyarrow cannot store is no input
            continue
        if case % 6 == 5:
            argv = ["train", path, "--out", tmp_path / f"m{case}", "--epochs", 1, "--device", "cpu", "--quiet"]
        else:
            argv = ["detect", model_dir, path, "--out", tmp_path / f"s{case}.csv", "--device", "cpu"]
        found = _outcome(capsys, argv)
        if found:
            findings.append(f"case {case} ({argv[0]}, {edits}, {path}): {found}")
    assert not findings, "\n".join(findings)


def test_scores_and_labels_mutations_through_evaluate(tmp_path, capsys, model_dir):
    rng = random.Random(7)
    frame = sensor_frame(ROWS, N).assign(label=[0] * 150 + [1] * 20 + [0] * 30)
    frame.to_csv(tmp_path / "labeled.csv", index=False)
    code, _, err = run_cli(capsys, "detect", model_dir, tmp_path / "labeled.csv", "--out", tmp_path / "scores.csv",
                           "--device", "cpu")
    assert code == 0, err
    scores, labels = (tmp_path / "scores.csv").read_text(), frame.to_csv(index=False)
    findings = []
    for case in range(80):
        which = rng.choice(["scores", "labels", "both"])
        s_text, s_edits = _mutated_csv(scores, rng) if which != "labels" else (scores, [])
        l_text, l_edits = _mutated_csv(labels, rng) if which != "scores" else (labels, [])
        s_path, l_path = tmp_path / f"s{case}.csv", tmp_path / f"l{case}.csv"
        s_path.write_text(s_text)
        l_path.write_text(l_text)
        found = _outcome(capsys, ["evaluate", s_path, "--labels", l_path, "--report", tmp_path / f"r{case}"])
        if found:
            findings.append(f"case {case} (scores {s_edits}, labels {l_edits}): {found}")
    assert not findings, "\n".join(findings)


JSON_VALUES = [None, -1, 0, 1, 2, 0.5, 1e308, -1e308, 1e-300, "x", "", "nan", [], {}, True, False, 10 ** 400,
               2 ** 63, [1], [0, 0], [-1, 5], [None], [[1]], {"a": 1}, "DELETE"]


def _leaves(node, path=()):
    """Every path into a JSON document (dict keys and list indices), the document's own () excepted."""
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield path + (key,)
        yield from _leaves(child, path + (key,))


def test_damaged_model_configs_through_detect(tmp_path, capsys, model_dir):
    """config.json with 1-3 of its values replaced by values of other types and sizes, or deleted, and now and
    then a truncated weights file: detect scores (exit 0) or names the damage in one line (random runs while it was
    written, 2026-12-04, found nothing: kept as the guard beside test_cli_messy.py's DAMAGED_MODELS)."""
    rng = random.Random(3)
    data = tmp_path / "data.csv"
    sensor_frame(ROWS, N).to_csv(data, index=False)
    original = json.loads((model_dir / "config.json").read_text())
    weights = (model_dir / "model.safetensors").read_bytes()
    findings = []
    for case in range(80):
        config, edits = json.loads(json.dumps(original)), []
        for _ in range(rng.randint(1, 3)):
            path, value = rng.choice(list(_leaves(config))), rng.choice(JSON_VALUES)
            parent = config
            for key in path[:-1]:
                parent = parent[key]
            if value == "DELETE" and isinstance(parent, dict):
                del parent[path[-1]]
            elif value != "DELETE":
                parent[path[-1]] = value
            edits.append(f"{'/'.join(map(str, path))} = {str(value)[:12]}")
        model = tmp_path / f"model{case}"
        model.mkdir()
        (model / "config.json").write_text(json.dumps(config))
        truncated = rng.random() < 0.15
        (model / "model.safetensors").write_bytes(weights[:rng.randrange(len(weights))] if truncated else weights)
        found = _outcome(capsys, ["detect", model, data, "--out", tmp_path / f"s{case}.csv", "--device", "cpu"])
        if found:
            findings.append(f"case {case} ({edits}{', weights truncated' if truncated else ''}): {found}")
    assert not findings, "\n".join(findings)


def test_mutated_context_and_calibration_data(tmp_path, capsys, model_dir):
    """``detect --context`` with a mutated context file or data file (the seam's checks meet every kind of
    timestamp the mutations make: text, repeats, other types), and ``calibrate`` on mutated data."""
    rng = random.Random(1205)
    frame = sensor_frame(2 * ROWS, N)
    before, after = frame.iloc[:ROWS].to_csv(index=False), frame.iloc[ROWS:].to_csv(index=False)
    findings = []
    for case in range(90):
        which = rng.choice(["context", "data", "both", "calibrate"])
        c_text, c_edits = _mutated_csv(before, rng) if which in ("context", "both") else (before, [])
        d_text, d_edits = _mutated_csv(after, rng) if which in ("data", "both", "calibrate") else (after, [])
        c_path, d_path = tmp_path / f"c{case}.csv", tmp_path / f"d{case}.csv"
        _write_csv(c_path, c_text, rng)
        _write_csv(d_path, d_text, rng)
        if which == "calibrate":
            argv = ["calibrate", model_dir, d_path, "--out", tmp_path / f"m{case}", "--device", "cpu"]
        else:
            argv = ["detect", model_dir, d_path, "--context", c_path, "--out", tmp_path / f"s{case}.csv",
                    "--device", "cpu", "--missing", rng.choice(["error", "interpolate"]), "--sensor-scores"]
        found = _outcome(capsys, argv)
        if found:
            findings.append(f"case {case} ({which}, context {c_edits}, data {d_edits}): {found}")
    assert not findings, "\n".join(findings)


def test_context_of_other_timestamp_types(tmp_path, capsys, model_dir):
    """A Parquet context whose timestamps are of another type than the data's (dates, zoned dates, durations,
    text, floats, as the index or a column): scored (exit 0) or refused in one line."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    rng = random.Random(12)
    data = tmp_path / "data.csv"
    sensor_frame(2 * ROWS, N).iloc[ROWS:].to_csv(data, index=False)
    findings = []
    for case in range(40):
        frame = sensor_frame(ROWS, N)
        kind = rng.choice(["dates", "zoned dates", "durations", "dates as objects", "float16", "string dtype",
                           "uint64", "bool", "category"])
        frame["timestamp"] = _converted(frame["timestamp"], kind, rng)
        path = tmp_path / f"c{case}.parquet"
        try:
            (frame.set_index("timestamp") if rng.random() < 0.5 else frame).to_parquet(path)
        except Exception:  # noqa: BLE001 - a frame pandas or pyarrow cannot index or store is no input
            continue
        found = _outcome(capsys, ["detect", model_dir, data, "--context", path, "--out", tmp_path / f"s{case}.csv",
                                  "--device", "cpu"])
        if found:
            findings.append(f"case {case} ({kind}): {found}")
    assert not findings, "\n".join(findings)


def _two_entity_fleet(tmp_path, model_dir) -> Path:
    """A fleet folder whose entities a and b are copies of ``model_dir``."""
    import shutil

    for name in ("a", "b"):
        shutil.copytree(model_dir, tmp_path / "fleet" / "models" / name)
    return tmp_path / "fleet"


def _mutated_entity_files(folder: Path, good: str, rng: random.Random) -> dict:
    """``folder`` made, with a.csv and b.csv each ``good`` mutated (and written in a random encoding); the edits."""
    folder.mkdir()
    edits = {}
    for name in ("a", "b"):
        text, edits[name] = _mutated_csv(good, rng)
        _write_csv(folder / f"{name}.csv", text, rng)
    return edits


def _cli_outcome(capsys, *argv) -> tuple:
    """(exit code, stderr) of ``mscred ARGV``; anything escaping main as the code, a finding."""
    try:
        code, _, err = run_cli(capsys, *argv)
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - anything escaping main is a finding
        code, err = f"{type(exc).__name__}: {exc}", capsys.readouterr().err
    return code, err


def _summarising_outcome(capsys, out: Path, *argv, notes: bool = False) -> tuple:
    """(exit code, what broke the contract or ""): `mscred ARGV`, a fleet command writing ``out/summary.csv``, must
    exit 0 or 1 with nothing on stderr (but ``notes:`` lines where ``notes``) and with the summary written, or 2
    with one ``mscred: error:`` line; never a traceback."""
    code, err = _cli_outcome(capsys, *argv)
    lines = [line for line in err.splitlines() if not (notes and line.startswith("note:"))]
    kept = code in (0, 1) and not lines or code == 2 and len(lines) == 1 and lines[0].startswith("mscred: error:")
    if not kept or "Traceback" in err:
        return code, f"exit {code}: {err[-800:]}"
    if code in (0, 1) and not (out / "summary.csv").exists():
        return code, f"exit {code} without a summary"
    return code, ""


def test_mutated_files_through_watch(tmp_path, capsys, model_dir):
    """``watch --idle-exit 0`` reads a mutated file in one poll (its last line taken whole, a newline or not): the
    follower's line cutting and header keeping meet every mutation and encoding the other tests use."""
    rng = random.Random(1206)
    good = sensor_frame(2 * ROWS, N).to_csv(index=False)
    findings = []
    for case in range(60):
        text, edits = _mutated_csv(good, rng)
        path = tmp_path / f"d{case}.csv"
        encoding = _write_csv(path, text, rng)
        argv = ["watch", model_dir, path, "--out", tmp_path / f"s{case}.csv", "--device", "cpu", "--idle-exit", "0",
                "--missing", rng.choice(["error", "interpolate"])]
        found = _outcome(capsys, argv + (["--encoding", encoding] if encoding != "utf-16" and rng.random() < 0.5
                                         else []))
        if found:
            findings.append(f"case {case} ({encoding}, {edits}): {found}")
    assert not findings, "\n".join(findings)


@pytest.mark.skipif(os.name == "nt", reason="a POSIX pipe stands for standard input here")
def test_mutated_files_piped_into_watch(tmp_path, capsys, model_dir, monkeypatch):
    """``watch -``: a mutated file written into a pipe made standard input, then the pipe closed (its writer has
    stopped): the watch reads it as it arrives and ends by itself (data.follow.StdinLines)."""
    rng = random.Random(20261207)
    good = sensor_frame(2 * ROWS, N).to_csv(index=False)
    findings = []
    for case in range(40):
        text, edits = _mutated_csv(good, rng)
        encoding = rng.choice(["utf-8", "utf-8", "latin-1", "utf-16"])
        data = text.encode(encoding, errors="replace")[:60_000]   # (within a pipe's buffer: written before the watch)
        read, write = os.pipe()
        os.write(write, data)
        os.close(write)
        with open(read, "r") as stdin:
            monkeypatch.setattr("sys.stdin", stdin)
            found = _outcome(capsys, ["watch", model_dir, "-", "--out", tmp_path / f"p{case}.csv", "--device", "cpu",
                                      "--missing", rng.choice(["error", "interpolate"])]
                             + (["--encoding", encoding] if encoding != "utf-8" else []))
        if found:
            findings.append(f"case {case} ({encoding}, {edits}): {found}")
    assert not findings, "\n".join(findings)


def test_mutated_long_tables_through_detect_and_watch(tmp_path, capsys, model_dir):
    """Long tables (time, sensor name, value; a time's lines together, as a historian appends them), mutated, through
    ``detect --long`` and through ``watch`` of a model trained on the long table (``--idle-exit 0``: the lines but the
    last time's in one poll, the last time's at the end, ``mscred.data.long_feed``)."""
    from mscred.detector import MSCRED

    wide = sensor_frame(2 * ROWS, N)
    good_frame = wide.melt(id_vars="timestamp", var_name="Tag", value_name="Value").sort_values(
        "timestamp", kind="stable")
    long_model = tmp_path / "long_model"
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, long_columns=("Tag", "Value")).fit(
        good_frame).save(long_model)
    good = good_frame.to_csv(index=False)
    rng = random.Random(20261206)
    findings = []
    for case in range(80):
        text, edits = _mutated_csv(good, rng)
        path = tmp_path / f"l{case}.csv"
        encoding = _write_csv(path, text, rng)
        missing = rng.choice(["error", "interpolate"])
        if case % 2:
            argv = ["watch", long_model, path, "--out", tmp_path / f"w{case}.csv", "--idle-exit", "0"]
        else:
            argv = ["detect", model_dir, path, "--out", tmp_path / f"d{case}.csv", "--long", "Tag,Value"]
        found = _outcome(capsys, argv + ["--device", "cpu", "--missing", missing] + (
            ["--encoding", encoding] if encoding != "utf-16" and rng.random() < 0.5 else []))
        if found:
            findings.append(f"case {case} ({argv[0]}, {encoding}, {edits}): {found}")
    assert not findings, "\n".join(findings)


def test_mutated_uneven_tables_through_a_resampling_model(tmp_path, capsys):
    """Unevenly spaced tables (date text, jittered steps), mutated, through ``detect``, ``watch`` (``--idle-exit 0``:
    the periods but the last in one poll, ``mscred.data.grid_feed``), ``calibrate`` and ``train --resample`` of a
    model that puts its data on a 20-second grid."""
    from mscred.detector import MSCRED

    rng = np.random.default_rng(6)
    steps = np.cumsum(rng.uniform(1.0, 9.0, 12 * ROWS)).round(2)
    frame = sensor_frame(12 * ROWS, N)
    frame["timestamp"] = (pd.Timestamp("2026-12-06") + pd.to_timedelta(steps, unit="s")).strftime(
        "%Y-%m-%d %H:%M:%S.%f")
    grid_model = tmp_path / "grid_model"
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, resample="20s",
           missing="interpolate").fit(frame).save(grid_model)
    _four_commands_fuzzed(capsys, tmp_path, frame.to_csv(index=False), grid_model, random.Random(20261207), 60,
                          lambda mutate: {"train": ["--resample", mutate.choice(["20s", "1min", "20s,last", "1min,max"])]})


def _four_commands_fuzzed(capsys, tmp_path, good: str, model, mutate: random.Random, cases: int, options) -> None:
    """``cases`` mutations of the table ``good`` through ``detect``, ``watch`` (``--idle-exit 0``), ``calibrate``
    of ``model`` and ``train`` in turn, each with a random missing policy and (half the time) its encoding named;
    ``options(mutate)``: {command: its own extra arguments}. Every run must keep the contract (``_outcome``)."""
    findings = []
    for case in range(cases):
        text, edits = _mutated_csv(good, mutate)
        path = tmp_path / f"f{case}.csv"
        encoding = _write_csv(path, text, mutate)
        kind = ("detect", "watch", "calibrate", "train")[case % 4]
        argv = {"detect": ["detect", model, path, "--out", tmp_path / f"d{case}.csv"],
                "watch": ["watch", model, path, "--out", tmp_path / f"w{case}.csv", "--idle-exit", "0"],
                "calibrate": ["calibrate", model, path, "--out", tmp_path / f"c{case}"],
                "train": ["train", path, "--out", tmp_path / f"t{case}", "--epochs", "1", "--set",
                          "channels=[4,8,8,8]", "--quiet"]}[kind]
        argv += options(mutate).get(kind, [])
        policy = mutate.choice(["error", "interpolate", "hold"])
        found = _outcome(capsys, argv + ["--device", "cpu", "--missing", policy] + (
            ["--encoding", encoding] if encoding != "utf-16" and mutate.random() < 0.5 else []))
        if found:
            findings.append(f"case {case} ({kind}, {encoding}, {edits}): {found}")
    assert not findings, "\n".join(findings)


def test_mutated_tables_through_a_model_reading_some_columns(tmp_path, capsys):
    """Tables of six sensors, a status text and a unit column, mutated (a header edit may rename or drop a column
    read or left out), through ``detect``, ``watch`` (``--idle-exit 0``), ``calibrate`` (with ``--drop-columns`` of
    their own too) and ``train --sensors --drop-columns`` of a model reading four sensors."""
    from mscred.detector import MSCRED

    frame = sensor_frame(3 * ROWS, 6)
    frame.insert(2, "status", np.where(np.arange(3 * ROWS) % 5, "RUN", "HOLD"))
    frame["unit"] = "degC"
    picked = ["s0", "s2", "s3", "s5"]
    picking_model = tmp_path / "picking_model"
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, only_sensors=picked,
           drop_columns=["status", "unit"]).fit(frame).save(picking_model)
    def own_options(mutate):   # (detect and calibrate: --drop-columns of their own, at times)
        extra = ["--drop-columns", mutate.choice(["s1", "status", "s1,x", "s9"])] if mutate.random() < 0.4 else []
        return {"detect": extra, "calibrate": extra,
                "train": ["--sensors", ",".join(picked), "--drop-columns", "status,unit"]}

    _four_commands_fuzzed(capsys, tmp_path, frame.to_csv(index=False), picking_model, random.Random(20261208), 40,
                          own_options)


def test_mutated_wall_time_tables_through_a_model_reading_them_in_a_zone(tmp_path, capsys):
    """Tables in Berlin's wall time through the autumn change's repeated hour, mutated (a time cell edited may fall in
    the hour the clocks skip in spring, read as no date, or go back), through the four commands of a model trained
    with ``time_zone``; train and detect, at times, with another zone of their own (or a name of none)."""
    from mscred.detector import MSCRED

    frame = sensor_frame(3 * ROWS, 4)
    times = pd.date_range(pd.Timestamp("2026-10-24 23:00", tz="UTC"), periods=3 * ROWS, freq="1min")
    frame["timestamp"] = times.tz_convert("Europe/Berlin").tz_localize(None).strftime("%Y-%m-%d %H:%M")
    zoned_model = tmp_path / "zoned_model"
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False,
           time_zone="Europe/Berlin").fit(frame).save(zoned_model)

    def zone(mutate):
        own = ["--time-zone", mutate.choice(["Europe/Berlin", "UTC", "America/Chicago", "Mars/Base"])]
        return {"detect": own if mutate.random() < 0.3 else [],
                "train": own if mutate.random() < 0.3 else ["--time-zone", "Europe/Berlin"]}

    _four_commands_fuzzed(capsys, tmp_path, frame.to_csv(index=False), zoned_model, random.Random(20261209), 40,
                          zone)


def test_mutated_tables_through_a_model_of_rates_and_states(tmp_path, capsys):
    """Tables of four float tags, a counter and a valve's text states, mutated (a state edited to another word or a
    number, a counter cell to text, a time repeated), through the four commands of a model given the counter's rate
    and the valve's states; train, at times, with other states of its own (or a spec of none)."""
    from mscred.detector import MSCRED

    frame = sensor_frame(3 * ROWS, 4)
    frame["bytes_total"] = np.cumsum(np.arange(3 * ROWS) % 7 + 1.0)
    frame["valve"] = np.where(np.arange(3 * ROWS) % 40 < 25, "OPEN", "CLOSED")
    counting_model = tmp_path / "counting_model"
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, rate_sensors=["bytes_total"],
           states=["valve=CLOSED,OPEN"]).fit(frame).save(counting_model)

    def options(mutate):
        own = ["--states", mutate.choice(["valve=CLOSED,OPEN", "valve=OPEN", "valve", "s0=A,B"])]
        return {"train": ["--rate", "bytes_total"] + (own if mutate.random() < 0.3 else ["--states",
                                                                                          "valve=CLOSED,OPEN"])}

    _four_commands_fuzzed(capsys, tmp_path, frame.to_csv(index=False), counting_model, random.Random(20261210), 40,
                          options)


def test_mutated_files_through_fleet_watch(tmp_path, capsys, model_dir):
    """fleet-watch of two entities whose files are mutated (``--idle-exit 0``: one poll each): exit 0, or exit 1
    with one ``<entity>: stopped: ...`` line per entity it stopped (the other scored), or exit 2 with one line;
    notes aside, nothing else on stderr and never a traceback."""
    rng = random.Random(1207)
    fleet = _two_entity_fleet(tmp_path, model_dir)
    good = sensor_frame(2 * ROWS, N).to_csv(index=False)
    findings, codes = [], set()
    for case in range(30):
        live = tmp_path / f"live{case}"
        edits = _mutated_entity_files(live, good, rng)
        code, err = _cli_outcome(capsys, "fleet-watch", fleet, live, "--out", tmp_path / f"s{case}", "--device", "cpu",
                                 "--idle-exit", "0")
        lines = [line for line in err.splitlines() if not line.startswith("note:")]
        stopped = [line for line in lines if line.startswith(("a: stopped: ", "b: stopped: "))]
        kept = (code == 0 and not lines or code == 1 and lines and lines == stopped
                or code == 2 and len(lines) == 1 and lines[0].startswith("mscred: error:"))
        if not kept or "Traceback" in err:
            findings.append(f"case {case} ({edits}): exit {code}: {err[-800:]}")
        codes.add(code)
    assert not findings, "\n".join(findings)
    assert {0, 1} <= codes, f"the mutations met only exit codes {codes}: pick another seed"


def _folder_and_table(root: Path, rows: int, rng: random.Random) -> dict:
    """``root`` made, with entity a's folder of two parts (the second's times after the first's) and b.csv, each
    file kept whole or mutated at random (half and half, so that parts also come through whole); the edits."""
    first, second = sensor_frame(rows, N), sensor_frame(rows, N, seed=1)
    second["timestamp"] += rows
    (root / "a").mkdir(parents=True)
    edits = {}
    for name, frame in (("a/1.csv", first), ("a/2.csv", second), ("b.csv", first)):
        if rng.random() < 0.5:
            frame.to_csv(root / name, index=False)
            continue
        text, edits[name] = _mutated_csv(frame.to_csv(index=False), rng)
        _write_csv(root / name, text, rng)
    return edits


def test_mutated_parts_through_fleet(tmp_path, capsys):
    """`mscred fleet` of a folder entity of two mutated parts and a mutated table beside it: each entity trains or
    gets its reason in the summary (exit 0 or 1), or none trains (exit 2, one line); notes aside, nothing else on
    stderr, never a traceback, and a summary whenever it exits 0 or 1."""
    rng = random.Random(1208)
    findings, codes = [], set()
    for case in range(12):
        fleet = tmp_path / f"fleet{case}"
        edits = _folder_and_table(fleet, 2 * ROWS, rng)
        out = tmp_path / f"out{case}"
        code, found = _summarising_outcome(capsys, out, "fleet", fleet, "--out", out, "--epochs", "1", "--set",
                                           "channels=4,8,8,8", "--device", "cpu", "--quiet", notes=True)
        if found:
            findings.append(f"case {case} ({edits}): {found}")
        codes.add(code)
    assert not findings, "\n".join(findings)
    assert 0 in codes and len(codes) > 1, f"the mutations met only exit codes {codes}: pick another seed"


@pytest.mark.parametrize("layout", ["tables", "folder"])
def test_mutated_tables_through_fleet_detect(tmp_path, capsys, model_dir, layout):
    """fleet-detect of two entities' new tables, mutated ("tables": a.csv and b.csv; "folder": entity a's folder of
    two files, the second's times after the first's, and b.csv, each kept or mutated): each entity is scored or
    gets its reason in the summary (exit 0 or 1), or none is scored (exit 2, one line); never a traceback."""
    rng = random.Random(77 if layout == "tables" else 1209)
    fleet = _two_entity_fleet(tmp_path, model_dir)
    good = sensor_frame(ROWS, N).to_csv(index=False)
    findings, codes = [], set()
    for case in range(30 if layout == "tables" else 20):
        new = tmp_path / f"new{case}"
        edits = (_mutated_entity_files(new, good, rng) if layout == "tables" else _folder_and_table(new, ROWS, rng))
        out = tmp_path / f"s{case}"
        code, found = _summarising_outcome(capsys, out, "fleet-detect", fleet, new, "--out", out, "--device", "cpu",
                                           "--quiet")
        if found:
            findings.append(f"case {case} ({edits}): {found}")
        codes.add(code)
    assert not findings, "\n".join(findings)
    # (every table mutated rarely leaves both whole: "tables" meets exits 1 and 2; "folder" must score one too)
    assert len(codes) > 1 and (layout == "tables" or 0 in codes), f"the mutations met only exit codes {codes}"
