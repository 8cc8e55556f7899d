"""CSV files in another text encoding than UTF-8 (cp1252 / Latin-1 exports of Windows tools): read with an explicit
``encoding`` (``--encoding``), refused without it by a line that names the option, never guessed."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cli_helpers import bad_input, run_cli, sensor_frame
from mscred.data.io import load_table
from mscred.errors import InputError

ROWS = 200   # >= 110: two windows, enough to train and validate with the default signature settings
NAMES = ["Temp °C", "µ flow", "pressure", "Durchfluß m³/h"]


def _text() -> str:
    return sensor_frame(ROWS, len(NAMES), names=NAMES).to_csv(index=False)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture
def cp1252_csv(tmp_path) -> Path:
    return _write(tmp_path / "windows.csv", _text().encode("cp1252"))


def test_cp1252_reads_with_its_encoding(cp1252_csv):
    table = load_table(cp1252_csv, encoding="cp1252")
    assert table.sensors == NAMES
    assert len(table.values) == ROWS
    assert load_table(cp1252_csv, encoding="latin-1").sensors == NAMES   # (the same bytes for these names)


def test_cp1252_refused_without_encoding_naming_the_option(cp1252_csv):
    with pytest.raises(InputError) as err:
        load_table(cp1252_csv)
    line = str(err.value)
    assert "\n" not in line
    assert "not UTF-8 text" in line and "byte 0xb0" in line
    assert "pass --encoding cp1252 (or the file's encoding), or save it as UTF-8" in line


def test_gzip_compressed_cp1252(tmp_path):
    path = _write(tmp_path / "windows.csv.gz", gzip.compress(_text().encode("cp1252")))
    assert load_table(path, encoding="cp1252").sensors == NAMES
    with pytest.raises(InputError, match="not UTF-8 text"):
        load_table(path)


def test_sniffed_separator_in_cp1252(tmp_path):
    """The separator is sniffed from a sample read in the same encoding (a ';'-separated export)."""
    path = _write(tmp_path / "windows.csv", _text().replace(",", ";").encode("cp1252"))
    assert load_table(path, encoding="cp1252").sensors == NAMES


@pytest.mark.parametrize("encoding", [None, "utf-8", "UTF8"])
def test_utf8_with_bom_unchanged(tmp_path, encoding):
    path = _write(tmp_path / "bom.csv", b"\xef\xbb\xbf" + _text().encode())
    table = load_table(path, encoding=encoding)
    assert table.sensors == NAMES   # the BOM is not part of 'timestamp', which stays the index
    assert table.index[0] == 0


def test_bytes_the_given_encoding_lacks(tmp_path):
    path = _write(tmp_path / "odd.csv", b"timestamp,a\n0,\x81\n")   # 0x81: no cp1252 character
    with pytest.raises(InputError, match=r"odd.csv: cannot read as CSV: not cp1252 text \(.*byte 0x81"):
        load_table(path, encoding="cp1252")


@pytest.mark.parametrize("encoding", ["no-such-codec", "base64", ""])
def test_unknown_encoding_is_refused(cp1252_csv, encoding):
    with pytest.raises(InputError, match=f"unknown text encoding '{encoding}'"):
        load_table(cp1252_csv, encoding=encoding)


def test_parquet_ignores_the_encoding(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    sensor_frame(ROWS, len(NAMES), names=NAMES).to_parquet(path, index=False)
    assert load_table(path, encoding="cp1252").sensors == NAMES


def test_cli_train_and_detect_with_encoding(tmp_path, capsys, cp1252_csv):
    model = tmp_path / "m"
    code, _, err = run_cli(capsys, "train", cp1252_csv, "--out", model, "--epochs", 1, "--device", "cpu", "--quiet",
                           "--encoding", "cp1252")
    assert code == 0, err
    assert json.loads((model / "config.json").read_text(encoding="utf-8"))["sensors"] == NAMES
    scores = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "detect", model, cp1252_csv, "--out", scores, "--device", "cpu",
                           "--encoding", "cp1252")
    assert code == 0, err
    assert scores.exists()
    bad_input(capsys, "detect", model, cp1252_csv, "--out", tmp_path / "s2.csv", "--device", "cpu",
              names=("windows.csv", "not UTF-8 text", "pass --encoding cp1252"))
    assert not (tmp_path / "s2.csv").exists()


def test_cli_train_refuses_cp1252_without_encoding(tmp_path, capsys, cp1252_csv):
    model = tmp_path / "m"
    bad_input(capsys, "train", cp1252_csv, "--out", model, "--epochs", 1, "--device", "cpu", "--quiet",
              names=("windows.csv", "not UTF-8 text", "pass --encoding cp1252 (or the file's encoding)"))
    assert not model.exists() and not (tmp_path / "m.checkpoints").exists()


@pytest.mark.parametrize("command", ["train", "detect"])
def test_cli_unknown_encoding(tmp_path, capsys, cp1252_csv, command):
    head = ["train", cp1252_csv] if command == "train" else ["detect", tmp_path / "no-model", cp1252_csv]
    bad_input(capsys, *head, "--out", tmp_path / "out", "--encoding", "cp-nope",
              names=("--encoding", "unknown text encoding 'cp-nope'"))
    assert not (tmp_path / "out").exists()


def test_cli_encoding_not_with_nproc(tmp_path, capsys, cp1252_csv):
    """The ranks of --nproc read DATA again, as UTF-8: refused before any work rather than failing there."""
    bad_input(capsys, "train", cp1252_csv, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
              "--encoding", "cp1252", "--nproc", 2, names=("--encoding", "--nproc"))
    assert not (tmp_path / "m").exists()
