"""CSV files in another text encoding than UTF-8 (cp1252 / Latin-1 exports of Windows tools): read with an explicit
``encoding`` (``--encoding``), refused without it by a line that names the option, never guessed."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
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


# ------------------------------------------------------------------------------------ evaluate, fleet, --nproc
def test_cli_evaluate_reads_cp1252_labels_anomalies_and_data(tmp_path, capsys):
    """--labels (a data table), the anomalies.csv beside it and --data in cp1252, SCORES.csv in UTF-8 (mscred's
    own): the root causes, named in both, match only when each file is read in its own encoding."""
    import numpy as np

    rows = 20
    labels = np.zeros(rows, dtype=int)
    labels[4:7] = 1
    frame = sensor_frame(rows, len(NAMES), names=NAMES)
    frame["label"] = labels
    _write(tmp_path / "test.csv", frame.to_csv(index=False).encode("cp1252"))
    _write(tmp_path / "anomalies.csv", f"start,end,root_causes\n4,7,{NAMES[0]};{NAMES[3]}\n".encode("cp1252"))
    scores = sensor_frame(rows, 0)[["timestamp"]]
    scores["score"], scores["is_anomaly"] = 0.1 + 0.5 * labels, labels
    scores["root_causes"] = [f"{NAMES[3]};{NAMES[0]}" if flag else "" for flag in labels]
    _write(tmp_path / "scores.csv", scores.to_csv(index=False).encode("utf-8"))

    argv = ["evaluate", tmp_path / "scores.csv", "--labels", tmp_path / "test.csv", "--data", tmp_path / "test.csv",
            "--json"]
    code, out, err = run_cli(capsys, *argv, "--encoding", "cp1252")
    assert code == 0, err
    result = json.loads(out)
    assert (result["events_found"], result["events_total"]) == (1, 1)
    assert result["root_cause_recall_at_3"] == 1.0   # 'Temp °C' and 'Durchfluß m³/h' as the scores name them
    bad_input(capsys, *argv, names=("test.csv", "not UTF-8 text", "pass --encoding cp1252"))


def test_evaluate_files_report_rereads_data_in_its_encoding(tmp_path):
    """The report reads --data itself when not handed the table (``build_report(data=None)``): in the encoding."""
    pytest.importorskip("matplotlib")
    import numpy as np

    from mscred.evaluation import compute_metrics, read_ground_truth, read_scores
    from mscred.report import build_report

    rows = 20
    frame = sensor_frame(rows, len(NAMES), names=NAMES)
    _write(tmp_path / "data.csv", frame.to_csv(index=False).encode("cp1252"))
    labels = (np.arange(rows) % 7 == 3).astype(int)
    frame[["timestamp"]].assign(score=0.1 + labels, is_anomaly=labels, root_causes="").to_csv(
        tmp_path / "scores.csv", index=False)
    frame[["timestamp"]].assign(label=labels).to_csv(tmp_path / "labels.csv", index=False)
    scores = read_scores(tmp_path / "scores.csv")
    truth = read_ground_truth(tmp_path / "labels.csv", scores)
    result = compute_metrics(scores, truth)
    with pytest.raises(InputError, match="data.csv: cannot read as CSV: not UTF-8 text"):
        build_report(tmp_path / "report", scores, truth, result, data_path=tmp_path / "data.csv")
    report = build_report(tmp_path / "report", scores, truth, result, data_path=tmp_path / "data.csv",
                          encoding="cp1252")
    assert (report / "index.html").is_file()


def test_cli_fleet_of_a_cp1252_folder(tmp_path, capsys):
    """A folder fleet in cp1252: a train/test sub-folder (labelled test part) and a table of normal data."""
    fleet = tmp_path / "fleet"
    (fleet / "pair").mkdir(parents=True)
    _write(fleet / "pair" / "train.csv", _text().encode("cp1252"))
    test = sensor_frame(ROWS, len(NAMES), seed=1, names=NAMES)
    test["label"] = [1 if 120 <= i < 130 else 0 for i in range(ROWS)]
    _write(fleet / "pair" / "test.csv", test.to_csv(index=False).encode("cp1252"))
    _write(fleet / "single.csv", _text().encode("cp1252"))
    argv = ["fleet", fleet, "--epochs", 1, "--device", "cpu", "--quiet"]

    code, _, err = run_cli(capsys, *argv, "--out", tmp_path / "utf8")   # (stdout: the summary of failed rows)
    assert code == 2 and err.count("\n") == 1, err
    assert "every one on bad input" in err and "not UTF-8 text" in err and "pass --encoding cp1252" in err
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, *argv, "--out", out, "--encoding", "cp1252")
    assert code == 0, err
    for entity in ("pair", "single"):
        row = json.loads((out / "rows" / f"{entity}.json").read_text(encoding="utf-8"))
        assert row["status"] == "ok" and row["encoding"] == "cp1252", row
        config = json.loads((out / "models" / entity / "config.json").read_text(encoding="utf-8"))
        assert config["sensors"] == NAMES
    assert json.loads((out / "rows" / "pair.json").read_text(encoding="utf-8"))["events_total"] == 1


def test_fleet_resume_trains_again_in_another_encoding(tmp_path):
    """The same bytes read in another encoding are other sensor names: --resume does not keep such a model."""
    from mscred.fleet import _done, discover, run_fleet

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    _write(fleet / "single.csv", _text().encode("cp1252"))
    out = tmp_path / "out"
    settings = {"epochs": 1, "device": "cpu", "channels": (4, 8, 8, 8)}
    assert list(run_fleet(str(fleet), out, settings, encoding="cp1252")["status"]) == ["ok"]
    entity = discover(str(fleet))[0]
    assert _done(out, entity, settings, "cp1252") and not _done(out, entity, settings, "latin-1")
    with pytest.raises(InputError, match="unknown text encoding 'utf8x'"):
        run_fleet(str(fleet), out, settings, encoding="utf8x")


def _public_layouts(root: Path) -> None:
    """One SMD machine (root/smd) and one SMAP channel (root/smap), long enough to train."""
    values = sensor_frame(ROWS, 4).drop(columns="timestamp").to_numpy()
    labels = np.zeros((ROWS, 1), dtype=int)
    labels[150:160] = 1
    for part, data, fmt in (("train", values, "%.6f"), ("test", values, "%.6f"), ("test_label", labels, "%d")):
        (root / "smd" / part).mkdir(parents=True)
        np.savetxt(root / "smd" / part / "m1.txt", data, delimiter=",", fmt=fmt)
    for part in ("train", "test"):
        (root / "smap" / part).mkdir(parents=True)
        np.save(root / "smap" / part / "P-1.npy", values)
    pd.DataFrame({"chan_id": ["P-1"], "spacecraft": ["SMAP"], "anomaly_sequences": ["[[150, 159]]"],
                  "class": ["[point]"], "num_values": [ROWS]}).to_csv(root / "smap" / "labeled_anomalies.csv",
                                                                      index=False)


def test_fleet_resume_keeps_what_no_encoding_reads(tmp_path):
    """--encoding reaches CSV text only: an SMD machine, a SMAP channel, a Parquet table and a sub-folder of Parquet
    parts read the same whatever it says, yet --resume trained every one of them again when it changed (also a row
    written so before: it recorded the option). A CSV entity is trained again; UTF-8 however spelled is one."""
    from mscred.fleet import _done, _reads_text, discover, run_fleet

    settings = {"epochs": 1, "device": "cpu", "channels": (4, 8, 8, 8)}
    _public_layouts(tmp_path)
    for kind in ("smd", "smap"):
        out = tmp_path / f"out_{kind}"
        assert list(run_fleet(kind, out, settings, root=str(tmp_path / kind), encoding="cp1252")["status"]) == ["ok"]
        (entity,) = discover(kind, str(tmp_path / kind))
        row = out / "rows" / f"{entity.name}.json"
        assert json.loads(row.read_text(encoding="utf-8"))["encoding"] is None
        assert all(_done(out, entity, settings, e) for e in (None, "latin-1", "cp1252"))
        before = row.read_text(encoding="utf-8")
        assert list(run_fleet(kind, out, settings, root=str(tmp_path / kind), resume=True)["status"]) == ["ok"]
        assert row.read_text(encoding="utf-8") == before   # (not trained again)
        row.write_text(json.dumps({**json.loads(before), "encoding": "cp1252"}), encoding="utf-8")   # (older row)
        assert _done(out, entity, settings, None)

    pytest.importorskip("pyarrow")   # (the Parquet tables)
    fleet = tmp_path / "fleet"
    (fleet / "pair").mkdir(parents=True)
    sensor_frame(ROWS, 4).to_parquet(fleet / "plain.parquet", index=False)
    sensor_frame(ROWS, 4).to_parquet(fleet / "pair" / "train.parquet", index=False)
    sensor_frame(ROWS, 4, seed=1).assign(label=0).to_parquet(fleet / "pair" / "test.parquet", index=False)
    (fleet / "text.csv").write_text(sensor_frame(ROWS, 4).to_csv(index=False), encoding="ascii")
    out = tmp_path / "out"
    assert list(run_fleet(str(fleet), out, settings, encoding="cp1252")["status"]) == ["ok"] * 3
    entities = {e.name: e for e in discover(str(fleet))}
    assert {name: _done(out, e, settings, "latin-1") for name, e in entities.items()} == {
        "pair": True, "plain": True, "text": False}
    assert _done(out, entities["text"], settings, "CP1252") and _done(out, entities["text"], settings, "windows-1252")
    assert list(run_fleet(str(fleet), out, settings)["status"]) == ["ok"] * 3   # (UTF-8, the default)
    assert _done(out, entities["text"], settings, "utf-8") and _done(out, entities["text"], settings, "UTF8")
    # anomalies.csv beside Parquet parts is text read in the encoding
    assert not _reads_text(entities["pair"])
    (fleet / "pair" / "anomalies.csv").write_text("start,end,root_causes\n", encoding="ascii")
    assert _reads_text(entities["pair"])


def test_cli_train_nproc_2_with_encoding(tmp_path, capsys, cp1252_csv):
    """Every rank reads DATA in the named encoding (the ranks once read it as UTF-8: --encoding was refused)."""
    model = tmp_path / "m"
    code, out, err = run_cli(capsys, "train", cp1252_csv, "--out", model, "--epochs", 1, "--device", "cpu", "--quiet",
                             "--nproc", 2, "--encoding", "cp1252")
    assert code == 0, err
    assert "on 2 process(es)" in out
    assert json.loads((model / "config.json").read_text(encoding="utf-8"))["sensors"] == NAMES


def test_torchrun_entry_passes_the_encoding(tmp_path, capsys, monkeypatch, cp1252_csv):
    """`python -m mscred.distributed train ... --encoding` (the torchrun entry) hands it to train_distributed."""
    import mscred.distributed as distributed

    seen = {}

    def trains(data, out, overrides, **kwargs):   # (the spawning itself: test_cli_train_nproc_2_with_encoding)
        seen.update(kwargs)

    monkeypatch.setattr(distributed, "train_distributed", trains)
    code = distributed.main(["train", str(cp1252_csv), "--out", str(tmp_path / "m"), "--device", "cpu",
                             "--nproc", "2", "--encoding", "cp1252"])
    assert code == 0, capsys.readouterr().err
    assert seen["encoding"] == "cp1252" and seen["nproc"] == 2
