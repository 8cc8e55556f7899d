"""Fleet mode (mscred.fleet): entity discovery, the rank assignment, and 3 tiny entities over 2 gloo ranks."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from mscred.errors import InputError
from mscred.fleet import Entity, assign, discover, evaluate, run_fleet

TINY = {"channels": (4, 8, 8, 8), "epochs": 1, "batch_size": 8, "device": "cpu"}




def _write_entities(root, count=3, n=5, length=1200):
    from mscred.data.synthetic import write_synthetic

    for seed in range(count):
        write_synthetic(root / f"ent{seed}", n_sensors=n, length=length, seed=seed)


def test_discover_folders_files_and_datasets(tmp_path):
    _write_entities(tmp_path / "fleet", count=2)
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_csv(tmp_path / "fleet" / "plain.csv", index=False)
    (tmp_path / "fleet" / "notes.txt").write_text("not a table")
    found = discover(str(tmp_path / "fleet"))
    assert [(e.name, e.kind) for e in found] == [("ent0", "dataset"), ("ent1", "dataset"), ("plain", "file")]
    assert found[0].spec == "table" and found[2].spec.endswith("plain.csv")

    smd = tmp_path / "smd"
    (smd / "train").mkdir(parents=True)
    for name in ("machine-1-2", "machine-1-1"):
        (smd / "train" / f"{name}.txt").write_text("1,2\n")
    assert [e.spec for e in discover("smd", str(smd))] == ["smd:machine-1-1", "smd:machine-1-2"]
    assert [e.name for e in discover("smd:machine-1-2", str(smd))] == ["machine-1-2"]

    with pytest.raises(InputError, match="--data-root"):
        discover("smd")
    with pytest.raises(InputError, match="neither a folder"):
        discover(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="not one file"):
        discover(str(tmp_path / "fleet" / "plain.csv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no entity found"):
        discover(str(tmp_path / "empty"))


def test_entities_sharing_a_file_name_are_refused(tmp_path):
    """"pump 1" and "pump_1" would share OUT/models/pump_1 and OUT/rows/pump_1.json: the second overwrote the first."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for name in ("pump 1", "pump_1", "pump2"):
        pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_csv(fleet / f"{name}.csv", index=False)
    with pytest.raises(InputError, match="pump 1 / pump_1"):
        discover(str(fleet))


def test_assign_is_longest_processing_time_first():
    sizes = {"a": 50, "b": 40, "c": 30, "d": 20, "e": 10}
    entities = [Entity(n, "file", n, None, s) for n, s in sizes.items()]
    # a -> 0 (50), b -> 1 (40), c -> 1 (70), d -> 0 (70), e -> 0 (80): ties go to the lower rank
    shares = assign(entities, 2)
    assert [[e.name for e in share] for share in shares] == [["a", "d", "e"], ["b", "c"]]
    assert [[e.name for e in s] for s in assign(entities, 1)] == [["a", "b", "c", "d", "e"]]


def test_evaluate_hand_computed():
    labels = np.array([0, 1, 1, 0, 0, 1, 0])
    scores = np.array([0.1, 0.9, 0.2, 0.3, 0.0, 0.8, 0.4])
    pred = (scores > 0.5).astype(np.int64)  # flags rows 1 and 5: both true, events 2 of 2
    row = evaluate(labels, scores, pred)
    assert row["precision"] == 1.0 and row["recall"] == pytest.approx(2 / 3) and row["f1"] == pytest.approx(0.8)
    assert (row["events_found"], row["events_total"]) == (2, 2)
    # AUC-ROC: 3 positives x 4 negatives; pairs won: 0.9 and 0.8 beat all 4, 0.2 beats 0.1 and 0.0 -> 10 / 12
    assert row["auc_roc"] == pytest.approx(10 / 12)


def test_fleet_of_three_entities_on_two_ranks(tmp_path):
    from mscred.detector import MSCRED

    _write_entities(tmp_path / "fleet")
    out = tmp_path / "out"
    summary = run_fleet(str(tmp_path / "fleet"), out, TINY, nproc=2, timeout=240)

    assert list(summary["entity"]) == ["ent0", "ent1", "ent2"]
    assert list(summary["status"]) == ["ok"] * 3, summary["status"].tolist()
    assert sorted(set(summary["rank"])) == [0, 1]  # both ranks got work
    assert (out / "summary.csv").is_file() and (out / "summary.md").read_text().count("\n| ent") == 3
    assert (summary["windows"] == (480 - 60) // 10 + 1 - 4).all()  # 40% of 1200 rows -> 43 segments -> 39 windows

    # ent1's model is the one a single process trains, and its metrics are those of its saved model
    data = pd.read_csv(tmp_path / "fleet" / "ent1" / "test.csv")
    ref = MSCRED(**TINY, progress=False).fit(pd.read_csv(tmp_path / "fleet" / "ent1" / "train.csv"))
    ours = MSCRED.load(out / "models" / "ent1", device="cpu")
    for name, value in ours.net_.state_dict().items():
        torch.testing.assert_close(value, ref.net_.state_dict()[name], rtol=1e-6, atol=1e-7)
    scores = ours.decision_function(data)
    row = summary.set_index("entity").loc["ent1"]
    expected = evaluate(data["label"].to_numpy(), scores, (scores > ours.threshold_).astype(np.int64))
    assert row["auc_pr"] == pytest.approx(expected["auc_pr"])
    assert row["f1"] == pytest.approx(expected["f1"])
    assert row["threshold"] == pytest.approx(ours.threshold_)

    # resume: nothing is trained again (rows untouched), in one process
    before = {p.name: p.read_text() for p in (out / "rows").iterdir()}
    again = run_fleet(str(tmp_path / "fleet"), out, TINY, nproc=1, resume=True)
    assert {p.name: p.read_text() for p in (out / "rows").iterdir()} == before
    assert list(again["status"]) == ["ok"] * 3
    # resume with another seed: the models of the earlier settings are not taken for this run's (they once were)
    from mscred.fleet import _done
    entity = discover(str(tmp_path / "fleet"))[0]
    assert _done(out, entity, TINY) and not _done(out, entity, {**TINY, "seed": 9})
    assert _done(out, entity, {**TINY, "device": "cpu", "progress": True})  # runtime settings do not count
    # a model written before a setting existed (its config.json without train.time_column, na_values,
    # long_columns) is that setting's default: not trained again
    import json
    config_path = out / "models" / entity.name / "config.json"
    written = json.loads(config_path.read_text())
    for key in ("time_column", "na_values", "long_columns"):
        written["config"]["train"].pop(key, None)   # (saved only where set: ADDED_SETTINGS)
    config_path.write_text(json.dumps(written))
    assert _done(out, entity, TINY) and not _done(out, entity, {**TINY, "time_column": "Time"})
    # resume after an entity's data changed: trained again (its old model was once kept and reported "ok")
    train = tmp_path / "fleet" / "ent1" / "train.csv"
    edited = pd.read_csv(train)
    edited.iloc[5, -1] += 1.0
    edited.to_csv(train, index=False)
    again = run_fleet(str(tmp_path / "fleet"), out, TINY, nproc=1, resume=True)
    after = {p.name: p.read_text() for p in (out / "rows").iterdir()}
    assert [name for name in sorted(after) if after[name] != before[name]] == ["ent1.json"]
    assert list(again["status"]) == ["ok"] * 3


def test_an_entity_of_parts(tmp_path):
    """A sub-folder of tables without a train/test pair (a logger's rolled files) is one entity trained on its
    tables as parts, in name order: the model `fit([part1, part2])` gives, every window of each part and none across
    the two; a part whose sensors differ is that entity's bad input; an edited part, or a part more, trains it
    again on --resume. (Such a folder was dropped without a word before.)"""
    from cli_helpers import sensor_frame
    from mscred.detector import MSCRED

    fleet, out = tmp_path / "fleet", tmp_path / "out"
    (fleet / "pump").mkdir(parents=True)
    (fleet / "bad").mkdir()
    series = sensor_frame(1200, 5, seed=3)
    series.iloc[:700].to_csv(fleet / "pump" / "2026-12-01.csv", index=False)
    series.iloc[700:].to_csv(fleet / "pump" / "2026-12-02.csv", index=False)
    (fleet / "pump" / "README.txt").write_text("not a part")
    series.iloc[:600].to_csv(fleet / "bad" / "a.csv", index=False)
    series.iloc[600:].rename(columns={"s0": "x0"}).to_csv(fleet / "bad" / "b.csv", index=False)
    assert [(e.name, e.kind) for e in discover(str(fleet))] == [("bad", "parts"), ("pump", "parts")]

    summary = run_fleet(str(fleet), out, TINY, nproc=1).set_index("entity")
    assert summary.loc["pump", "status"] == "ok"
    assert summary.loc["bad", "status"].startswith("bad input: ") and "x0" in summary.loc["bad", "status"]
    # 700 rows: (700 - 60) // 10 + 1 = 65 segments, 61 windows of 5; 500 rows: 45 segments, 41 windows
    assert (summary.loc["pump", "rows"], summary.loc["pump", "windows"]) == (1200, 61 + 41)
    ref = MSCRED(**TINY, progress=False).fit([series.iloc[:700], series.iloc[700:].reset_index(drop=True)])
    ours = MSCRED.load(out / "models" / "pump", device="cpu")
    for name, value in ours.net_.state_dict().items():
        torch.testing.assert_close(value, ref.net_.state_dict()[name], rtol=1e-6, atol=1e-7)
    assert summary.loc["pump", "threshold"] == pytest.approx(ref.threshold_, rel=1e-6)

    before = (out / "rows" / "pump.json").read_text()
    run_fleet(str(fleet), out, TINY, nproc=1, resume=True)
    assert (out / "rows" / "pump.json").read_text() == before   # the same parts: not trained again
    edited = series.iloc[700:].copy()
    edited.iloc[3, -1] += 1.0
    edited.to_csv(fleet / "pump" / "2026-12-02.csv", index=False)
    run_fleet(str(fleet), out, TINY, nproc=1, resume=True)
    edited_row = (out / "rows" / "pump.json").read_text()
    assert edited_row != before
    series.iloc[:300].to_csv(fleet / "pump" / "2026-12-03.csv", index=False)   # a day more: trained again
    summary = run_fleet(str(fleet), out, TINY, nproc=1, resume=True).set_index("entity")
    assert (out / "rows" / "pump.json").read_text() != edited_row and summary.loc["pump", "rows"] == 1500


def test_summary_counts_stay_integers_and_out_is_not_the_source(tmp_path, capsys):
    """A failed entity's empty cells once turned every count column to floats (400.0); and --out naming the fleet's
    own folder made the next run read summary.csv as an entity: refused."""
    from tests.cli_helpers import run_cli

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    pd.DataFrame({f"s{j}": np.arange(20.0) * (j + 1) for j in range(5)}).to_csv(fleet / "short.csv", index=False)
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.standard_normal((300, 5)), columns=[f"s{j}" for j in range(5)]).to_csv(fleet / "ok.csv",
                                                                                            index=False)
    run_fleet(str(fleet), tmp_path / "out", TINY, nproc=1)
    lines = (tmp_path / "out" / "summary.csv").read_text().splitlines()
    ok = next(line for line in lines if line.startswith("ok,")).split(",")
    assert ok[:7] == ["ok", "0", "ok", "300", "5", "21", "1"], ok
    assert "<NA>" not in (tmp_path / "out" / "summary.md").read_text()
    capsys.readouterr()  # (the fleet above's notes: ok.csv's 300 rows leave 5 validation windows)
    code, _, err = run_cli(capsys, "fleet", fleet, "--out", fleet, "--quiet", "--device", "cpu")
    assert code == 2 and err.count("\n") == 1 and "is the fleet's own folder" in err, err
    assert sorted(p.name for p in fleet.iterdir()) == ["ok.csv", "short.csv"]


def test_a_failing_entity_gets_an_error_row(tmp_path):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    pd.DataFrame({f"s{j}": np.arange(20.0) * (j + 1) for j in range(5)}).to_csv(fleet / "short.csv", index=False)
    summary = run_fleet(str(fleet), tmp_path / "out", TINY, nproc=1)
    assert summary["status"][0].startswith("bad input: ") and "too few to train" in summary["status"][0]
    assert json.loads((tmp_path / "out" / "rows" / "short.json").read_text())["status"] == summary["status"][0]


def test_missing_values_in_a_fleet(tmp_path):
    # an entity folder (train.csv / test.csv with labels) whose tables have gaps: an error row by default, trained
    # and evaluated with missing="interpolate", as `mscred fleet --missing interpolate` passes it
    _write_entities(tmp_path / "fleet", count=1)
    folder = tmp_path / "fleet" / "ent0"
    for name in ("train.csv", "test.csv"):
        frame = pd.read_csv(folder / name)
        frame.loc[100:104, frame.columns[-2]] = np.nan
        frame.to_csv(folder / name, index=False)
    summary = run_fleet(str(tmp_path / "fleet"), tmp_path / "a", TINY, nproc=1)
    assert summary["status"][0].startswith("bad input: ") and "missing value" in summary["status"][0]
    summary = run_fleet(str(tmp_path / "fleet"), tmp_path / "b", {**TINY, "missing": "interpolate"}, nproc=1)
    assert summary["status"][0] == "ok" and summary["events_total"][0] >= 1


def test_cli_fleet_of_bad_input_only_is_exit_2(tmp_path, capsys):
    """`mscred fleet` where no entity trained and every one failed on its data: exit 2 with one error line naming
    the first entity and why (as for one bad table), the summary written; a fleet where some trained and others
    failed: exit 1."""
    from tests.cli_helpers import run_cli

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for name in ("a_short", "b_short"):
        pd.DataFrame({f"s{j}": np.arange(20.0) * (j + 1) for j in range(5)}).to_csv(fleet / f"{name}.csv",
                                                                                    index=False)
    code, _, err = run_cli(capsys, "fleet", fleet, "--out", tmp_path / "out", "--quiet", "--device", "cpu")
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("mscred: error: no entity trained") and "a_short" in lines[0], lines[0]
    assert "too few to train" in lines[0] and "summary.csv" in lines[0]
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert list(summary["entity"]) == ["a_short", "b_short"]
    assert all(s.startswith("bad input: ") for s in summary["status"])


def test_cli_fleet_partly_trained_is_exit_1(tmp_path, capsys, monkeypatch):
    import mscred.fleet
    from tests.cli_helpers import run_cli

    statuses = ["ok", "bad input: x.csv: too few rows", "error: RuntimeError: out of memory"]
    summary = pd.DataFrame({"entity": ["e0", "e1", "e2"], "status": statuses})
    monkeypatch.setattr(mscred.fleet, "run_fleet", lambda *a, **k: summary)
    code, out, err = run_cli(capsys, "fleet", tmp_path, "--out", tmp_path / "out", "--quiet")
    assert code == 1 and "1 of 3 entities trained" in out and "error" not in err


def test_dataset_name_means_the_dataset_even_beside_a_folder_of_that_name(tmp_path, monkeypatch):
    """`mscred fleet smd --data-root smd` run where ./smd exists read ./smd as a folder of tables ("no entity
    found") and ignored --data-root: a fleet dataset's name always means the dataset; ./smd means the folder."""
    smd = tmp_path / "smd"
    (smd / "train").mkdir(parents=True)
    (smd / "train" / "machine-1-1.txt").write_text("1,2\n")
    monkeypatch.chdir(tmp_path)
    assert [e.spec for e in discover("smd", "smd")] == ["smd:machine-1-1"]
    assert [e.spec for e in discover("SMD:machine-1-1", "smd")] == ["smd:machine-1-1"]
    with pytest.raises(InputError, match="--data-root"):  # the name without a root: asked for, not read as ./smd
        discover("smd")
    with pytest.raises(InputError, match="no entity found"):  # a path spells the folder
        discover("./smd")
    with pytest.raises(InputError, match="--data-root smd is for a fleet dataset"):  # never silently ignored
        discover("./smd", "smd")


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00chan_id\n"])
def test_damaged_labeled_anomalies_is_bad_input(tmp_path, content):
    """An empty or non-UTF-8 labeled_anomalies.csv was `internal error: EmptyDataError/UnicodeDecodeError`."""
    (tmp_path / "train").mkdir()
    (tmp_path / "labeled_anomalies.csv").write_bytes(content)
    with pytest.raises(InputError, match="labeled_anomalies.csv: cannot read"):
        discover("smap", str(tmp_path))
