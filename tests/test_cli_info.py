"""`mscred info MODEL_DIR`: a saved model described, after the checks `detect`'s load makes."""
from __future__ import annotations

import json

import pytest

from cli_helpers import bad_input, run_cli, sensor_frame, tiny_model
from mscred.detector import MSCRED


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("info") / "model", sensor_frame(400, 5))


def test_info_describes_the_model(model_dir, capsys):
    model = MSCRED.load(model_dir, device="cpu")
    code, out, err = run_cli(capsys, "info", model_dir)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{model_dir}: an mscred model, written by mscred ")
    assert lines[1] == "sensors     5: s0, s1, s2, s3, s4"
    assert lines[2] == "windows     10, 30, 60 rows, gap 10, 5 steps: a window needs 100 rows"
    assert lines[3] == f"scoring     z_sensor; threshold {model.threshold_:.4g} (beta_max)"
    assert lines[4].startswith("trained     1 epoch(s); last train loss ")
    assert "model.channels=(4, 8, 8, 8)" in lines[5] and "train.epochs=1" in lines[5]
    code, out, err = run_cli(capsys, "info", model_dir, "--json")
    summary = json.loads(out)
    assert summary["threshold"] == model.threshold_ and summary["sensors"] == model.sensors_
    assert summary["changed_settings"]["model.channels"] == [4, 8, 8, 8]
    assert summary["epochs_trained"] == 1 and summary["val_loss"] == model.history_[-1]["val_loss"]


def test_info_follows_calibrate_and_refuses_damage(model_dir, tmp_path, capsys):
    import shutil

    data = tmp_path / "normal.csv"
    sensor_frame(400, 5, seed=9).to_csv(data, index=False)
    code, out, err = run_cli(capsys, "calibrate", model_dir, data, "--out", tmp_path / "m", "--threshold",
                             "percentile")
    assert code == 0, err
    code, out, err = run_cli(capsys, "info", tmp_path / "m", "--json")
    summary = json.loads(out)
    assert summary["threshold_rule"] == "percentile"
    assert summary["threshold"] == MSCRED.load(tmp_path / "m", device="cpu").threshold_
    shutil.copytree(model_dir, tmp_path / "broken")
    weights = tmp_path / "broken" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    bad_input(capsys, "info", tmp_path / "broken", names=["model.safetensors", "damaged weights"])
    bad_input(capsys, "info", tmp_path / "none", names=["model directory not found"])


def test_info_of_a_fleet(model_dir, tmp_path, capsys):
    """A fleet's folder (models/<entity>/, or a folder of model folders): a line per entity's model, each loaded and
    checked as detect loads it; a damaged one's line names the damage, exit 1; --json one object of them all."""
    import shutil

    model = MSCRED.load(model_dir, device="cpu")
    for name in ("pump_1", "pump_22"):
        shutil.copytree(model_dir, tmp_path / "fleet" / "models" / name)
    code, out, err = run_cli(capsys, "info", tmp_path / "fleet")
    assert code == 0 and not err, err
    line = f"5 sensors; threshold {model.threshold_:.4g} (z_sensor, beta_max); 1 epoch(s), val loss " \
           f"{model.history_[-1]['val_loss']:.4g}"
    assert out.splitlines() == [f"{tmp_path / 'fleet'}: a fleet of 2 model(s)", f"pump_1   {line}", f"pump_22  {line}"]
    code, out, err = run_cli(capsys, "info", tmp_path / "fleet" / "models", "--json")   # a folder of model folders
    found = json.loads(out)
    assert code == 0 and [row["entity"] for row in found["models"]] == ["pump_1", "pump_22"]
    assert found["models"][0]["threshold"] == model.threshold_ and found["models"][1]["sensors"] == model.sensors_
    (tmp_path / "fleet" / "models" / "pump_22" / "model.safetensors").write_bytes(b"not weights")
    code, out, err = run_cli(capsys, "info", tmp_path / "fleet")
    assert code == 1 and out.splitlines()[0].endswith("a fleet of 2 model(s), 1 damaged")
    assert out.splitlines()[1] == f"pump_1   {line}" and out.splitlines()[2].startswith("pump_22  damaged: ")
    bad_input(capsys, "info", tmp_path, names=["config.json", "missing"])   # neither a model nor a fleet's folder
