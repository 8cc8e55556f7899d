"""Audit of `mscred train` and its Trainer (2026-12-03): what a demanding user with tiny data, odd options and
crashed runs met, each with the test that failed before its fix.

* A micro-batch at least as large as the training windows but below the batch turned CUDA graphs off, though every
  batch is clamped to the windows (the graphs capture ``min(batch_size, windows)``): ``plan_steps`` decides with
  the windows known, testable on a CPU.
* --batch-size (and the other counts) beyond JSON's portable integers (2**53) was accepted.
* A checkpoint whose metadata is damaged or of another mscred (no history, a wrong shape of Adam's state, NaN
  weights, ...) was a KeyError/TypeError/RuntimeError traceback (exit 1), or trained on to "diverged".
* A damaged data record beside the checkpoint (sensors.json) let --resume continue on other data without a word.
* --val-scores under a file failed after training (model written, exit 2); inside the model folder or the
  checkpoints' folder it was accepted, to be refused or deleted by the next run.
"""
from __future__ import annotations

import json
import warnings

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from cli_helpers import bad_input, run_cli, sensor_frame
from mscred.config import ModelConfig, TrainConfig
from mscred.errors import IgnoredSettingWarning, InputError, NoteWarning
from mscred.model import MSCREDNet
from mscred.train import Trainer
from mscred.train_checkpoint import CHECKPOINT_NAME, DATA_RECORD_NAME

N = 6
SMALL = dict(n_sensors=N, channels=(4, 8, 8, 8))


def _segments(count: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(count, 3, N, N, generator=torch.Generator().manual_seed(seed))


def _net(seed: int = 0) -> MSCREDNet:
    torch.manual_seed(seed)
    return MSCREDNet(ModelConfig(**SMALL))


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**{**dict(epochs=1, batch_size=8, progress=False, device="cpu"), **kw})


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "train.csv"
    sensor_frame(200, 5).to_csv(path, index=False)   # 200 rows, 5 sensors: the CLI tests' tiny training
    return path


# ---------------------------------------------------------------------------------------------------- 1. graphs
def test_plan_clamps_the_step_to_the_windows():
    """The plan of a step: a micro-batch as large as the (clamped) step is none, and the graphs stay on."""
    from mscred.train import plan_steps

    assert plan_steps(32, 8, True) == (32, 8, False)            # windows unknown: the batch decides
    assert plan_steps(32, 8, True, windows=5) == (5, None, True)   # tiny data: 5 windows a step, one pass
    assert plan_steps(32, 8, True, windows=8) == (8, None, True)
    assert plan_steps(32, 8, True, windows=9) == (9, 8, False)     # more windows than a micro-batch: eager
    assert plan_steps(32, 8, False, windows=5) == (5, None, False)  # no graphs here: nothing to turn on
    assert plan_steps(32, None, True, windows=5) == (5, None, True)
    # under DDP a step is a rank's shard: ceil(min(batch, windows) / world_size)
    assert plan_steps(16, 3, True, windows=5, world_size=2) == (3, None, True)
    assert plan_steps(16, 2, True, windows=5, world_size=2) == (3, 2, False)


def test_micro_batch_as_large_as_the_windows_keeps_the_graphs(monkeypatch):
    """--micro-batch 8 --batch-size 32 on data of 5 training windows: every batch is the 5 windows, which one
    micro-batch holds, so the graphs run (they were turned off). The step fit builds says so; CUDA itself cannot run
    here, so the step is recorded instead of built."""
    import mscred.train as train

    monkeypatch.setattr(train, "graphs_enabled", lambda setting, device: True)
    seen = {}

    class Built(Exception):
        pass

    def make_step(self, data):
        seen.update(use_graphs=self.use_graphs, micro_batch=self.micro_batch, windows=len(data),
                    capturable=self.optimizer.param_groups[0]["capturable"])
        raise Built

    monkeypatch.setattr(Trainer, "_make_step", make_step)
    with warnings.catch_warnings(), pytest.raises(Built):
        warnings.simplefilter("error", IgnoredSettingWarning)   # no note: nothing is turned off
        Trainer(_net(), _cfg(batch_size=32, micro_batch=8)).fit(_segments(9))   # 9 segments, 5 steps: 5 windows
    assert seen == dict(use_graphs=True, micro_batch=None, windows=5, capturable=True)

    # more windows than the micro-batch: eager micro-batches, as before, with one note (from fit, which knows)
    seen.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredSettingWarning)
        trainer = Trainer(_net(), _cfg(batch_size=32, micro_batch=8))
    with pytest.warns(IgnoredSettingWarning, match="CUDA graphs off: micro-batches of 8") as caught, \
            pytest.raises(Built):
        trainer.fit(_segments(20))
    assert len(caught) == 1
    assert seen == dict(use_graphs=False, micro_batch=8, windows=16, capturable=False)


# ---------------------------------------------------------------------------------------------------- 2. bounds
@pytest.mark.parametrize("option", ["--batch-size", "--epochs", "--micro-batch", "--nproc"])
def test_counts_beyond_json_integers_are_refused(tmp_path, capsys, data, option, monkeypatch):
    def trains(*args, **kwargs):   # (accepted, --epochs 2**53 + 1 trained for ever, --nproc spawned that many)
        raise AssertionError(f"{option} {2 ** 53 + 1} accepted")

    monkeypatch.setattr("mscred.detector.MSCRED.fit", trains)
    monkeypatch.setattr("mscred.distributed.train_distributed", trains)
    out = tmp_path / "m"
    bad_input(capsys, "train", data, "--out", out, "--device", "cpu", option, 2 ** 53 + 1,
              names=(option, str(2 ** 53 + 1), "1<=x<=2**53"))
    assert not out.exists() and not (tmp_path / "m.checkpoints").exists()


@pytest.mark.parametrize("argv", [["demo", "--quick", "--epochs"], ["fleet", "{data}", "--out", "{out}", "--nproc"]])
def test_demo_and_fleet_counts_are_bounded_too(tmp_path, capsys, data, argv):
    """demo's --epochs and fleet's own --nproc had no upper bound (fleet's training options share train's)."""
    argv = [a.format(data=tmp_path, out=tmp_path / "f") for a in argv]
    bad_input(capsys, *argv, 2 ** 53 + 1, names=(argv[-1], "1<=x<=2**53"))
    assert not (tmp_path / "f").exists()


def test_batch_size_at_the_bound_trains(tmp_path, capsys, data):
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--device", "cpu", "--epochs", 1,
                           "--quiet", "--batch-size", 2 ** 53)
    assert code == 0, err
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["config"]["train"]["batch_size"] == 2 ** 53


# ---------------------------------------------------------------------------------------------------- checkpoints
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """(metadata, tensors) of a real one-epoch checkpoint."""
    folder = tmp_path_factory.mktemp("ckpt")
    Trainer(_net(), _cfg()).fit(_segments(14), None, checkpoint_dir=folder)
    with safe_open(str(folder / CHECKPOINT_NAME), framework="pt") as f:
        return json.loads(f.metadata()["mscred"]), {k: f.get_tensor(k) for k in f.keys()}


def _nan(tensor):
    return tensor * float("nan")


DAMAGED = {   # name: (change of the metadata, change of the tensors, words of the message)
    "no history (another version)": (lambda m: {k: v for k, v in m.items() if k != "history"}, None, "'history'"),
    "no optimizer groups": (lambda m: {k: v for k, v in m.items() if k != "optimizer_groups"}, None,
                            "'optimizer_groups'"),
    "epoch not a count": (lambda m: {**m, "epoch": "x"}, None, "epoch 'x'"),
    "epoch 1.5": (lambda m: {**m, "epoch": 1.5}, None, "epoch 1.5"),
    "metadata a list": (lambda m: [1, 2], None, "a list"),
    "history not a list": (lambda m: {**m, "history": "x"}, None, "history"),
    "history of other length": (lambda m: {**m, "history": []}, None, "0 epoch(s) of history for 1"),
    "settings not objects": (lambda m: {**m, "extra": {"train_config": 5}}, None, "recorded settings"),
    "lr not a number": (lambda m: {**m, "optimizer_groups": [{**m["optimizer_groups"][0], "lr": "fast"}]}, None,
                        "lr 'fast'"),
    "junk groups": (lambda m: {**m, "optimizer_groups": [{"lr": 1}]}, None, "optimizer groups"),
    "other parameter count": (lambda m: {**m, "optimizer_groups": [{**m["optimizer_groups"][0], "params": []}]},
                              None, "optimizer state does not match"),
    "no random state": (None, lambda t: {k: v for k, v in t.items() if k != "rng.cpu"}, "rng.cpu"),
    "random state damaged": (None, lambda t: {**t, "rng.cpu": torch.zeros(3, dtype=torch.uint8)}, "random state"),
    "Adam state of another shape": (None, lambda t: {**t, "optim.0.exp_avg": torch.zeros(2)},
                                    "exp_avg of shape (2,)"),
    "state of a parameter it lacks": (None, lambda t: {**t, "optim.99.exp_avg": torch.zeros(2)}, "parameter 99"),
    "optimizer key of another form": (None, lambda t: {**t, "optim.x.exp_avg": torch.zeros(2)}, "'optim.x.exp_avg'"),
    "NaN weights": (None, lambda t: {**t, "model.encoder.conv1.weight": _nan(t["model.encoder.conv1.weight"])},
                    "encoder.conv1.weight holds NaN"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_checkpoint_metadata_is_input_error(tmp_path, checkpoint, case):
    change_meta, change_tensors, words = DAMAGED[case]
    meta, tensors = checkpoint
    meta = change_meta(json.loads(json.dumps(meta))) if change_meta else meta
    tensors = change_tensors(dict(tensors)) if change_tensors else tensors
    save_file(tensors, str(tmp_path / CHECKPOINT_NAME), metadata={"mscred": json.dumps(meta)})
    with pytest.raises(InputError, match="checkpoint") as caught:
        Trainer(_net(), _cfg(epochs=2)).fit(_segments(14), None, checkpoint_dir=tmp_path, resume=True)
    assert words in str(caught.value) and str(tmp_path / CHECKPOINT_NAME) in str(caught.value)


def test_checkpoint_names_the_version_that_wrote_it(tmp_path, checkpoint):
    import mscred

    meta, tensors = checkpoint
    assert meta["mscred_version"] == mscred.__version__
    meta = {k: v for k, v in meta.items() if k != "history"} | {"mscred_version": "9.9.9"}
    save_file(tensors, str(tmp_path / CHECKPOINT_NAME), metadata={"mscred": json.dumps(meta)})
    with pytest.raises(InputError, match="written by mscred 9.9.9"):
        Trainer(_net(), _cfg(epochs=2)).fit(_segments(14), None, checkpoint_dir=tmp_path, resume=True)


def test_damaged_checkpoint_at_the_cli_is_one_line_and_kept(tmp_path, capsys, data):
    """`train --resume` on a checkpoint of another version: exit 2, one line, and the checkpoint stays."""
    out = tmp_path / "m"
    assert run_cli(capsys, "train", data, "--out", out, "--epochs", 1, "--device", "cpu", "--quiet")[0] == 0
    ckpt = tmp_path / "m.checkpoints"
    import shutil
    shutil.rmtree(out)
    # a checkpoint left by an interrupted run: train one epoch without saving the model
    from mscred.detector import MSCRED
    from mscred.data.io import load_table
    MSCRED(epochs=1, device="cpu").fit(load_table(data), checkpoint_dir=ckpt)
    path = ckpt / CHECKPOINT_NAME
    with safe_open(str(path), framework="pt") as f:
        meta, tensors = json.loads(f.metadata()["mscred"]), {k: f.get_tensor(k) for k in f.keys()}
    del meta["history"]
    save_file(tensors, str(path), metadata={"mscred": json.dumps(meta)})
    bad_input(capsys, "train", data, "--out", out, "--epochs", 2, "--device", "cpu", "--quiet", "--resume",
              names=(str(path), "'history'", "without --resume"))
    assert path.exists() and not out.exists()


def test_damaged_data_record_refuses_a_resume(tmp_path, capsys, data):
    """sensors.json beside a checkpoint, damaged: the data the checkpoint was trained on is unknown, so a resume is
    refused (it continued on any data without a word); starting over still works."""
    from mscred.detector import MSCRED
    from mscred.data.io import load_table

    ckpt = tmp_path / "m.checkpoints"
    MSCRED(epochs=1, device="cpu").fit(load_table(data), checkpoint_dir=ckpt)
    (ckpt / DATA_RECORD_NAME).write_text("{garbage")
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 2, "--device", "cpu", "--quiet",
              "--resume", names=(DATA_RECORD_NAME, "damaged", "without --resume"))
    assert (ckpt / CHECKPOINT_NAME).exists()
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                           "--quiet")
    assert code == 0, err


def test_resume_with_other_signature_settings_is_refused(tmp_path, data):
    """A gap of 5 instead of 10 cuts the same data into other windows for the same network: the resume continued
    the checkpoint on them without a word (steps are compared by the run settings, windows by the weights)."""
    from mscred.detector import MSCRED
    from mscred.data.io import load_table

    ckpt = tmp_path / "m.checkpoints"
    MSCRED(epochs=1, device="cpu").fit(load_table(data), checkpoint_dir=ckpt)
    with pytest.raises(InputError, match=r"cut the data into other windows \(gap 10 -> 5\)"):
        MSCRED(epochs=2, gap=5, device="cpu").fit(load_table(data), checkpoint_dir=ckpt, resume=True)
    with pytest.warns(NoteWarning, match="resuming from"):   # the same settings resume
        assert MSCRED(epochs=2, device="cpu").fit(load_table(data), checkpoint_dir=ckpt, resume=True).history_


def test_other_values_same_rows_say_so(tmp_path, data):
    from mscred.data.io import load_table
    from mscred.train_checkpoint import match_checkpoint_data

    table = load_table(data)
    match_checkpoint_data(tmp_path, table.sensors, table.values, "a.csv", resume=False)
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"x")
    with pytest.raises(InputError, match=r"the same 200 rows, other values"):
        match_checkpoint_data(tmp_path, table.sensors, table.values + 1, "a.csv", resume=True)
    with pytest.raises(InputError, match=r"199 rows against its 200"):
        match_checkpoint_data(tmp_path, table.sensors, table.values[1:], "a.csv", resume=True)


# ---------------------------------------------------------------------------------------------------- --val-scores
@pytest.mark.parametrize("where, words", [
    ("notes.txt/val.csv", ["notes.txt is a file, not a folder"]),
    ("m/val.csv", ["inside the model folder (--out)"]),
    ("m.checkpoints/val.csv", ["inside the checkpoints' folder"]),
])
def test_val_scores_place_is_refused_before_training(tmp_path, capsys, data, where, words):
    (tmp_path / "notes.txt").write_text("mine")
    target = tmp_path / where
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu", "--quiet",
              "--val-scores", target, names=(str(target), *words))
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.checkpoints").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_starting_over_says_it_removes_the_earlier_checkpoint(tmp_path, capsys, data):
    """A rerun that forgot --resume after a crash starts over (as documented), and now says what it drops."""
    from mscred.detector import MSCRED
    from mscred.data.io import load_table

    ckpt = tmp_path / "m.checkpoints"
    MSCRED(epochs=1, device="cpu").fit(load_table(data), checkpoint_dir=ckpt)
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                           "--quiet")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "checkpoint of an earlier run" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "(1 epoch(s) done)" in notes[0], err
    assert "--resume continues one" in notes[0]


def test_resume_with_other_window_steps_is_refused(tmp_path):
    """The network takes windows of any length, so a checkpoint of 5-segment windows loaded into a run of 4 and
    trained on other inputs without a word; the recorded steps are compared as the other run settings are."""
    Trainer(_net(), _cfg(), steps=5).fit(_segments(14), None, checkpoint_dir=tmp_path)
    with pytest.raises(InputError, match=r"other settings \(steps 5 -> 4\)"):
        Trainer(_net(), _cfg(epochs=2), steps=4).fit(_segments(14), None, checkpoint_dir=tmp_path, resume=True)


def test_resume_with_another_network_names_the_setting(tmp_path):
    """Other channels: the settings that differ are named (it was the size mismatch of the first weight)."""
    Trainer(_net(), _cfg()).fit(_segments(14), None, checkpoint_dir=tmp_path)
    torch.manual_seed(0)
    wider = MSCREDNet(ModelConfig(**{**SMALL, "channels": (8, 8, 8, 8)}))
    with pytest.raises(InputError, match=r"other settings \(channels \[4, 8, 8, 8\] -> \[8, 8, 8, 8\]\)"):
        Trainer(wider, _cfg(epochs=2)).fit(_segments(14), None, checkpoint_dir=tmp_path, resume=True)


def test_ctrl_c_mid_epoch_keeps_the_last_epoch_and_resume_finishes_the_same_model(tmp_path, capsys, data,
                                                                                   monkeypatch):
    """Ctrl-C in epoch 2: exit 130, the checkpoint of epoch 1 kept (and said where), no model folder, no temporary;
    the same command with --resume then writes the model an uninterrupted run writes."""
    from safetensors.torch import load_file

    argv = ("train", data, "--epochs", 2, "--device", "cpu", "--quiet")
    assert run_cli(capsys, *argv, "--out", tmp_path / "straight")[0] == 0

    run_epoch = Trainer._run_epoch

    def interrupted(self, epoch, *args, **kwargs):
        if epoch == 1:
            raise KeyboardInterrupt
        return run_epoch(self, epoch, *args, **kwargs)

    out = tmp_path / "m"
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_run_epoch", interrupted)
        code, _, err = run_cli(capsys, *argv, "--out", out)
    assert code == 130, err
    ckpt = tmp_path / "m.checkpoints"
    assert f"the last finished epoch is kept in {ckpt}" in err and "Traceback" not in err
    with safe_open(str(ckpt / CHECKPOINT_NAME), framework="pt") as f:
        assert json.loads(f.metadata()["mscred"])["epoch"] == 1
    assert not out.exists() and not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    code, _, err = run_cli(capsys, *argv, "--out", out, "--resume")
    assert code == 0, err
    assert "resuming from" in err and not ckpt.exists()
    straight, resumed = load_file(tmp_path / "straight" / "model.safetensors"), load_file(out / "model.safetensors")
    assert straight.keys() == resumed.keys()
    for name, value in straight.items():
        assert torch.equal(value, resumed[name]), name


def test_checkpoints_folder_of_other_files_is_refused_before_training(tmp_path, capsys, data):
    """A finished run removes MODEL.checkpoints as a whole: a folder of the user's files there was deleted."""
    ckpt = tmp_path / "m.checkpoints"
    ckpt.mkdir()
    (ckpt / "epoch5-copy.safetensors").write_text("mine")
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu", "--quiet",
              names=(str(ckpt), "epoch5-copy.safetensors", "not mscred's checkpoints"))
    assert (ckpt / "epoch5-copy.safetensors").read_text() == "mine" and not (tmp_path / "m").exists()
    (ckpt / "epoch5-copy.safetensors").unlink()
    (ckpt / ".checkpoint.safetensors.host-1.x.tmp").mkdir()   # a killed run's temporary: no refusal
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                           "--quiet")
    assert code == 0, err
    assert not ckpt.exists()


def test_data_inside_the_checkpoints_folder_is_not_deleted(tmp_path, capsys):
    """DATA kept in MODEL.checkpoints/ was removed with the folder when the run finished."""
    ckpt = tmp_path / "m.checkpoints"
    ckpt.mkdir()
    data = ckpt / "train.csv"
    sensor_frame(200, 5).to_csv(data, index=False)
    bad_input(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu", "--quiet",
              names=(str(ckpt), "train.csv"))
    assert data.exists() and not (tmp_path / "m").exists()
