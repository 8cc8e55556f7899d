"""Audit of `mscred fleet` as an operator runs it: what counts as an entity, what --out may be, and that --resume
after an interruption or with an --out inside --data-root reports the models that are there."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import mscred.fleet
from mscred.errors import InputError
from mscred.fleet import NOT_RUN, check_out, data_fingerprint, discover, run_fleet, train_entity

TINY = {"channels": (4, 8, 8, 8), "epochs": 1, "batch_size": 8, "device": "cpu"}


def _table(path, rows=300, n=4):
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.standard_normal((rows, n)), columns=[f"s{j}" for j in range(n)]).to_csv(path, index=False)


def test_hidden_entries_are_skipped_and_a_half_entity_is_kept(tmp_path):
    """.git/, .hidden.csv and macOS's ._x.csv were trained (or failed) as entities; a sub-folder with test.csv but
    no train.csv was dropped without a word ("1 of 1 entities trained" for a fleet of two)."""
    fleet = tmp_path / "fleet"
    (fleet / ".git").mkdir(parents=True)
    (fleet / "half").mkdir()
    for path in (fleet / "plain.csv", fleet / ".hidden.csv", fleet / "._plain.csv", fleet / ".git" / "train.csv",
                 fleet / ".git" / "test.csv", fleet / "half" / "test.csv"):
        _table(path)
    (fleet / "README.txt").write_text("notes")
    found = discover(str(fleet))
    assert [e.name for e in found] == ["half", "plain"]
    row = train_entity(found[0], tmp_path / "out", TINY)
    assert row["status"].startswith("bad input: ") and "expected train.csv and test.csv" in row["status"]
    assert "half: no train part" in row["status"]


def test_a_name_clash_names_the_files_and_a_repeated_name_is_one_entity(tmp_path):
    """x.csv beside x.parquet was refused as "(x / x)", which says nothing to rename; smd:m1,m1 clashed with itself."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    _table(fleet / "x.csv")
    pd.read_csv(fleet / "x.csv").to_parquet(fleet / "x.parquet")
    with pytest.raises(InputError, match=r"\(x\.csv / x\.parquet\)"):
        discover(str(fleet))
    (tmp_path / "smd" / "train").mkdir(parents=True)
    (tmp_path / "smd" / "train" / "m1.txt").write_text("1,2\n")
    assert [e.name for e in discover("smd:m1,m1", str(tmp_path / "smd"))] == ["m1"]


def test_out_inside_data_root_does_not_change_the_fingerprint(tmp_path):
    """The fingerprint read every "<name>.*" below --data-root: with --out inside it, OUT/rows/<name>.json (rewritten
    by every run) was part of the data, and --resume retrained every entity, every time."""
    smd = tmp_path / "smd"
    for part in ("train", "test", "test_label"):
        (smd / part).mkdir(parents=True)
        (smd / part / "machine-1-1.txt").write_text("1,2\n")
    tm = tmp_path / "tm"
    for part in ("train", "test"):
        (tm / "data" / part).mkdir(parents=True)
        np.save(tm / "data" / part / "A-1.npy", np.ones((3, 2)))
    (tm / "labeled_anomalies.csv").write_text("chan_id,spacecraft,anomaly_sequences\nA-1,SMAP,[]\n")
    for source, root, name in (("smd", smd, "machine-1-1"), ("smap", tm, "A-1")):
        entity = discover(source, str(root))[0]
        before = data_fingerprint(entity)
        (root / "results" / "rows").mkdir(parents=True)
        (root / "results" / "rows" / f"{name}.json").write_text('{"status": "ok"}')
        assert data_fingerprint(entity) == before, source
        (root / "test" if source == "smd" else root / "data" / "test").joinpath(
            f"{name}.{'txt' if source == 'smd' else 'npy'}").write_bytes(b"edited")
        assert data_fingerprint(entity) != before, source   # its own files still count


def test_out_holding_user_files_is_refused_before_any_training(tmp_path, capsys, monkeypatch):
    """A folder of the user's (their own summary.csv) was written into, summary.csv replaced; an entity whose model
    folder held a user's file failed only after its training. Both are refused up front, exit 2, one line."""
    from tests.cli_helpers import run_cli

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    _table(fleet / "e1.csv")
    monkeypatch.setattr(mscred.fleet, "train_entity", lambda *a, **k: pytest.fail("trained before the refusal"))
    user = tmp_path / "user"
    (user / "models").mkdir(parents=True)
    (user / "summary.csv").write_text("mine\n")
    code, _, err = run_cli(capsys, "fleet", fleet, "--out", user, "--quiet", "--device", "cpu")
    assert code == 2 and err.count("\n") == 1 and "not a fleet's output (models, summary.csv)" in err, err
    assert (user / "summary.csv").read_text() == "mine\n" and not (user / "rows").exists()

    earlier = tmp_path / "earlier"   # a fleet's output, with a note left in an entity's model folder
    (earlier / "rows").mkdir(parents=True)
    (earlier / "models" / "e1").mkdir(parents=True)
    (earlier / "models" / "e1" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "fleet", fleet, "--out", earlier, "--quiet", "--device", "cpu")
    assert code == 2 and err.count("\n") == 1 and "notes.txt" in err, err

    # what a fleet leaves, the leftover of a write killed outright included, is not refused
    (earlier / "models" / "e1" / "notes.txt").unlink()
    for name in ("summary.csv", "summary.md", ".summary.csv.host-1.abc.tmp"):
        (earlier / name).write_text("")
    check_out(earlier, discover(str(fleet)))

    # the user's own folder beside an earlier run's entries (`evaluate --report earlier/report`) is left alone: it
    # had made the next run refuse the folder the fleet itself had made
    (earlier / "report").mkdir()
    (earlier / "report" / "index.html").write_text("mine")
    check_out(earlier, discover(str(fleet)))
    (earlier / "rows" / "notes.txt").write_text("mine")   # but a rows/ that is not a fleet's is not its folder
    with pytest.raises(InputError, match="not a fleet's output"):
        check_out(earlier, discover(str(fleet)))


def test_an_interrupted_or_failed_retrain_leaves_no_earlier_row_or_model(tmp_path, monkeypatch):
    """The model is saved before the test part is scored and the row written: a run stopped in between left the
    new model under the old "ok" row, and --resume then reported the old model's threshold for the new one, and
    the stopped run left the first run's summary.csv in place; an entity that failed on retraining kept its old
    model beside its error row."""
    from mscred.data.synthetic import write_synthetic
    from mscred.detector import MSCRED

    fleet = tmp_path / "fleet"
    write_synthetic(fleet / "ent", n_sensors=4, length=1200, seed=0)
    out = tmp_path / "out"
    run_fleet(str(fleet), out, TINY)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(mscred.fleet, "evaluate", interrupted)   # Ctrl-C after the new model's save
        with pytest.raises(KeyboardInterrupt):
            run_fleet(str(fleet), out, {**TINY, "seed": 5}, resume=True)
    assert not (out / "rows" / "ent.json").exists() and not (out / "models" / "ent").exists()
    # and the summary says so, where the first run's stayed, its "ok" and threshold beside the new model
    assert pd.read_csv(out / "summary.csv")["status"].tolist() == [NOT_RUN]
    summary = run_fleet(str(fleet), out, {**TINY, "seed": 5}, resume=True)
    model = MSCRED.load(out / "models" / "ent", device="cpu")
    assert summary["status"][0] == "ok" and summary["threshold"][0] == pytest.approx(model.threshold_)

    train = pd.read_csv(fleet / "ent" / "train.csv")
    train.iloc[3, -1] = np.nan
    train.to_csv(fleet / "ent" / "train.csv", index=False)
    summary = run_fleet(str(fleet), out, {**TINY, "seed": 5}, resume=True)
    assert summary["status"][0].startswith("bad input: ") and not (out / "models" / "ent").exists()
    assert json.loads((out / "rows" / "ent.json").read_text())["status"] == summary["status"][0]


def test_the_summary_says_where_each_model_is(tmp_path):
    """Model folders are the entities' file names: "pump 1" is models/pump_1, which the summary did not say."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    _table(fleet / "pump 1.csv")
    (fleet / "bad.csv").write_text("a,b\n1,2\n")
    summary = run_fleet(str(fleet), tmp_path / "out", TINY).set_index("entity")
    assert summary.loc["pump 1", "model"] == "models/pump_1"
    assert (tmp_path / "out" / summary.loc["pump 1", "model"] / "config.json").is_file()
    assert pd.isna(summary.loc["bad", "model"])
    assert "models/pump_1" in (tmp_path / "out" / "summary.md").read_text()


def test_dataset_fleets_find_the_layouts_the_loaders_find(tmp_path):
    """The loaders read SMD from a GitHub checkout above ServerMachineDataset/ and SMAP/MSL from the Kaggle copy's
    data/data/, but fleet looked for the folders its own way: "no SMD entity found", "no SMAP entity found", and
    --resume's fingerprint missed the arrays; blanks in the labels table hid channels too."""
    from test_audit_datasets import _telemanom_files, smd_checkout

    repo, root, _ = smd_checkout(tmp_path)
    for where in (repo, root, root / "train"):
        (entity,) = discover("smd", str(where))
        assert entity.name == "machine-1-1"
        assert [p.relative_to(root).as_posix() for p in mscred.fleet._data_files(entity)] == [
            "interpretation_label/machine-1-1.txt", "test/machine-1-1.txt", "test_label/machine-1-1.txt",
            "train/machine-1-1.txt"]
    kaggle = tmp_path / "kaggle"
    _telemanom_files(kaggle / "data" / "data", kaggle, rows={
        "chan_id": [" P-1", "M-1 "], "spacecraft": ["SMAP ", " MSL"], "anomaly_sequences": ["[[3, 5]]", "[[0, 0]]"],
        "class": ["[point]", "[point]"], "num_values": [40, 40]})
    for kind, name in (("smap", "P-1"), ("msl", "M-1")):
        (entity,) = discover(kind, str(kaggle))
        assert entity.name == name
        files = [p.relative_to(kaggle).as_posix() for p in mscred.fleet._data_files(entity)]
        assert files == ["data/data/test/" + name + ".npy", "data/data/train/" + name + ".npy",
                         "labeled_anomalies.csv"]
