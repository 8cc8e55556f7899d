"""Settings `mscred train` ignores on this machine (--bf16 without native bf16, --cuda-graphs without CUDA) are said
as one ``note:`` line each on stderr (not --quiet), as the CLI's other notes; the Python API gets a warning. They
were a log.info that the CLI, which configures no logging, never showed."""
from __future__ import annotations

import warnings

import pytest
import torch

import mscred.train as train_module
from cli_helpers import run_cli, sensor_frame
from mscred.config import TrainConfig
from mscred.errors import IgnoredSettingWarning
from mscred.train import Trainer


@pytest.fixture
def no_native_bf16(monkeypatch):
    monkeypatch.setattr(train_module, "bf16_native", lambda device: False)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "train.csv"
    sensor_frame(200, 5).to_csv(path, index=False)   # 200 rows, 5 sensors: test_cli_messy.py's tiny training
    return path


def test_train_says_which_settings_it_ignores(tmp_path, capsys, data, no_native_bf16):
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                           "--bf16", "--cuda-graphs")
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    bf16 = [line for line in notes if "--bf16" in line]
    graphs = [line for line in notes if "--cuda-graphs" in line]
    assert len(bf16) == 1 and "ignored" in bf16[0] and "native bf16" in bf16[0] and "float32" in bf16[0], err
    assert len(graphs) == 1 and "ignored" in graphs[0] and "CUDA device" in graphs[0], err
    assert "Warning" not in err and "Traceback" not in err   # note lines, not Python's warning format


def test_quiet_train_drops_the_ignored_setting_notes(tmp_path, capsys, data, no_native_bf16):
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                           "--bf16", "--cuda-graphs", "--quiet")
    assert code == 0, err
    assert "ignored" not in err and "Warning" not in err


def test_python_api_gets_a_warning(no_native_bf16):
    cfg = TrainConfig(device="cpu", bf16=True, cuda_graphs=True, progress=False)
    with pytest.warns(IgnoredSettingWarning) as caught:
        trainer = Trainer(torch.nn.Linear(1, 1), cfg)
    assert trainer.bf16 is False and trainer.use_graphs is False
    assert sorted(str(w.message).split(" ", 1)[0] for w in caught) == ["--bf16", "--cuda-graphs"]
    with warnings.catch_warnings():   # asked for nothing it cannot apply: silent
        warnings.simplefilter("error", IgnoredSettingWarning)
        Trainer(torch.nn.Linear(1, 1), TrainConfig(device="cpu", progress=False))
