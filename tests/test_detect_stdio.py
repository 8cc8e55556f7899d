"""`mscred detect MODEL - --out -`: DATA from standard input, SCORES.csv to standard output -- the same bytes as
the files give, the summary on stderr, and bad input still one line on stderr with nothing on stdout."""
from __future__ import annotations

import io
import json
import sys

import pytest

from cli_helpers import bad_input, run_cli, sensor_frame, tiny_model

TRAIN_ROWS = 600


@pytest.fixture(scope="module")
def series():
    return sensor_frame(TRAIN_ROWS + 300, 4, seed=9)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("stdio") / "model", series.iloc[:TRAIN_ROWS])


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("kind", ["csv", "parquet", "semicolons", "gzip"])
def test_the_same_scores_as_the_files(tmp_path, model_dir, series, capsys, monkeypatch, kind):
    if kind == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the parquet extra)")
    data = tmp_path / f"new.{'parquet' if kind == 'parquet' else 'csv.gz' if kind == 'gzip' else 'csv'}"
    test = series.iloc[TRAIN_ROWS:]
    if kind == "parquet":
        test.to_parquet(data)
    else:
        test.to_csv(data, index=False, sep=";" if kind == "semicolons" else ",")
    out, events = tmp_path / "scores.csv", tmp_path / "events.csv"
    code, stdout, _ = run_cli(capsys, "detect", model_dir, data, "--out", out, "--device", "cpu")
    assert code == 0 and stdout.startswith("scored ")
    _stdin(monkeypatch, data.read_bytes())
    code, stdout, stderr = run_cli(capsys, "detect", model_dir, "-", "--out", "-", "--device", "cpu", "--events",
                                   events)
    assert code == 0
    assert stdout == out.read_text()
    assert stderr.splitlines()[-1].endswith("wrote standard output and " + str(events))
    assert events.exists()


def test_json_summary_goes_to_stderr(tmp_path, model_dir, series, capsys, monkeypatch):
    _stdin(monkeypatch, series.iloc[TRAIN_ROWS:].to_csv(index=False).encode())
    code, stdout, stderr = run_cli(capsys, "detect", model_dir, "-", "--out", "-", "--device", "cpu", "--json")
    assert code == 0 and stdout.startswith("timestamp,score,is_anomaly")
    assert json.loads(stderr.splitlines()[-1])["rows"] == 300


def test_a_file_to_stdout_and_stdin_to_a_file(tmp_path, model_dir, series, capsys, monkeypatch):
    data, out = tmp_path / "new.csv", tmp_path / "s.csv"
    series.iloc[TRAIN_ROWS:].to_csv(data, index=False)
    code, stdout, _ = run_cli(capsys, "detect", model_dir, data, "--out", "-", "--device", "cpu")
    _stdin(monkeypatch, data.read_bytes())
    assert run_cli(capsys, "detect", model_dir, "-", "--out", out, "--device", "cpu")[0] == 0
    assert code == 0 and stdout == out.read_text()


def test_bad_input_names_stdin_and_writes_nothing(tmp_path, model_dir, series, capsys, monkeypatch):
    bad = series.iloc[TRAIN_ROWS:].astype(object)
    bad.iloc[4, 2] = "abc"
    _stdin(monkeypatch, bad.to_csv(index=False).encode())
    line = bad_input(capsys, "detect", model_dir, "-", "--out", "-", "--device", "cpu",
                     names=["<stdin>: column 's1' row 5", "is not a number"])
    assert "mscred-stdin-" not in line   # (never the copy's path)
    _stdin(monkeypatch, b"")
    bad_input(capsys, "detect", model_dir, "-", "--out", "-", "--device", "cpu", names=["<stdin>", "empty"])
    for option in ("--events", "--context"):
        bad_input(capsys, "detect", model_dir, "-", "--out", tmp_path / "s.csv", option, "-",
                  names=[f"{option} '-'"])
    assert not (tmp_path / "s.csv").exists()
    data = tmp_path / "d.csv"
    series.iloc[TRAIN_ROWS:].to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--val-scores", "-",
              names=["only detect's and watch's --out take '-'"])
    assert not (tmp_path / "m").exists()


def test_a_terminal_is_refused(model_dir, capsys, monkeypatch):
    class Terminal(io.TextIOWrapper):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal(io.BytesIO(b"")))
    bad_input(capsys, "detect", model_dir, "-", "--out", "-", names=["standard input, which is a terminal"])
