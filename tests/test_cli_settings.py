"""`--set NAME=VALUE` of the training commands (``mscred.cli.settings``): any setting of mscred.config."""
from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from cli_helpers import bad_input, run_cli, sensor_frame
from mscred.cli.settings import FROM_DATA, read_value
from mscred.config import MSCREDConfig
from mscred.detector import SECTIONS


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_setting_reads_back_its_default_from_text(section):
    """Each field of every section (every type the config uses: int, float, bool, str, tuples of ints, optionals)
    reads its own default written as a user would; optionals read 'none' as None."""
    defaults = getattr(MSCREDConfig(), section)
    hints = typing.get_type_hints(SECTIONS[section])
    for field in dataclasses.fields(defaults):
        value, kind = getattr(defaults, field.name), hints[field.name]
        if value is not None:
            got = read_value(_text(value), kind)
            assert got == value and type(got) is type(value), (section, field.name, got)
        if typing.get_origin(kind) is typing.Union:
            assert read_value("none", kind) is None and read_value("Auto", kind) is None
    assert read_value("[20, 60, 120]", hints.get("windows", tuple[int, ...])) == (20, 60, 120)


def test_values_not_of_the_type_are_refused():
    with pytest.raises(ValueError):
        read_value("1.5", int)
    with pytest.raises(ValueError):
        read_value("10,,30", tuple[int, ...])
    with pytest.raises(ValueError):
        read_value("maybe", bool)
    with pytest.raises(ValueError):
        read_value("none", int)
    assert read_value("off", typing.Optional[bool]) is False and read_value("1e-3", float) == 0.001


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("settings") / "train.csv"
    sensor_frame(700, 5).to_csv(path, index=False)
    return path


def test_train_takes_any_setting(data, tmp_path, capsys):
    out = tmp_path / "m"
    code, stdout, err = run_cli(capsys, "train", data, "--out", out, "--epochs", "1", "--quiet",
                                "--set", "windows=20,40", "--set", "gap=5", "--set", "scales=20", "--set",
                                "train__lr=1e-3", "--set", "channels=4,8,8,8", "--set", "top_k=2",
                                "--set", "cuda_graphs=none")
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["signature"]["windows"] == [20, 40] and config["signature"]["gap"] == 5
    assert config["score"]["scales"] == [20] and config["score"]["top_k"] == 2
    assert config["train"]["lr"] == 0.001 and config["model"]["channels"] == [4, 8, 8, 8]
    assert config["train"]["epochs"] == 1 and config["train"]["cuda_graphs"] is None


@pytest.mark.parametrize("argv,names", [
    (["--set", "windw=3"], ["unknown setting 'windw'; did you mean 'windows'?"]),
    (["--set", "gap=x"], ["gap='x': signature.gap takes an integer"]),
    (["--set", "windows=10,,30"], ["signature.windows takes a comma-separated list of integers"]),
    (["--set", "bf16=maybe"], ["train.bf16 takes true or false"]),
    (["--set", "gap"], ["expected NAME=VALUE"]),
    (["--set", "=3"], ["expected NAME=VALUE"]),
    (["--set", "n_sensors=3"], ["n_sensors: set by training from the data's sensor count"]),
    (["--set", "epochs=2", "--epochs", "3"], ["--set epochs: train.epochs is also given by the command's own option"]),
    (["--set", "gap=5", "--set", "signature__gap=6"], ["signature.gap is also given by --set gap"]),
    (["--set", "method=mse", "--theta", "0.01"], ["score.method is also given by the command's own option"]),
    (["--set", "gap=0"], ["signature.gap 0: must be a positive integer"]),
    (["--set", "scales=15"], ["score.scales (15,): must be some of the windows (10, 30, 60)"]),
])
def test_bad_settings_are_one_line_and_write_nothing(data, tmp_path, capsys, argv, names):
    bad_input(capsys, "train", data, "--out", tmp_path / "m", *argv, names=names)
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.checkpoints").exists()


def test_fleet_and_ddp_take_settings(tmp_path, capsys, monkeypatch):
    """fleet trains every entity with them; the DDP command passes them on (its launcher stubbed)."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    for k in range(2):
        sensor_frame(400, 4, seed=k).to_csv(folder / f"e{k}.csv", index=False)
    code, stdout, err = run_cli(capsys, "fleet", folder, "--out", tmp_path / "out", "--epochs", "1", "--quiet",
                                "--set", "channels=4,8,8,8", "--set", "gap=20")
    assert code == 0, err
    for k in range(2):
        config = json.loads((tmp_path / "out" / "models" / f"e{k}" / "config.json").read_text())["config"]
        assert config["signature"]["gap"] == 20 and config["model"]["channels"] == [4, 8, 8, 8]

    import mscred.distributed
    from mscred.cli.distributed_train import train_ddp

    seen = {}
    monkeypatch.setattr(mscred.distributed, "train_distributed",
                        lambda data, out, overrides, **kw: seen.update(overrides))
    with pytest.raises(SystemExit) as stop:
        train_ddp.main([str(folder / "e0.csv"), "--out", str(tmp_path / "ddp"), "--set", "gap=20"],
                       standalone_mode=True)
    assert stop.value.code == 0
    assert seen["gap"] == 20 and seen["progress"] is True
