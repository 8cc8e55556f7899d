"""DDP training (mscred.distributed) against one process: 2 gloo ranks on the CPU, tiny model, a few steps.

The claim under test: with the same global batch, N ranks train the SAME weights as one process (up to float
rounding), the last partial batch and a rank with an empty shard included.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from mscred.config import ModelConfig, TrainConfig
from mscred.distributed import fit_segments, shard, train_distributed
from mscred.model import MSCREDNet
from mscred.train import Trainer
from mscred.train_checkpoint import CHECKPOINT_NAME

TINY = ModelConfig(n_sensors=5, n_scales=3, channels=(4, 8, 8, 8))




def test_shard_is_contiguous_and_balanced():
    batch = torch.arange(10, 21)  # 11 windows over 3 ranks: 4, 4, 3
    parts = [shard(batch, r, 3) for r in range(3)]
    assert [p.tolist() for p in parts] == [[10, 11, 12, 13], [14, 15, 16, 17], [18, 19, 20]]
    assert [shard(torch.tensor([7]), r, 2).tolist() for r in range(2)] == [[7], []]  # b < N: an empty shard


def test_scaled_shard_losses_average_to_the_global_gradient():
    """rank r's loss (N / b) * sum of its windows' MSE, averaged over ranks as DDP does, has the gradient of the
    global mean loss: checked in float64 for unequal shards (b = 5 over N = 2 and N = 3)."""
    torch.manual_seed(0)
    net = MSCREDNet(TINY).double()
    x = torch.rand(5, 5, 3, 5, 5, dtype=torch.float64)

    def grads(loss):
        net.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in net.parameters()]

    def losses(idx):
        return (net(x[idx]) - x[idx, -1]).square().flatten(1).mean(dim=1)

    full = grads(losses(torch.arange(5)).mean())
    for world in (2, 3):
        total = [torch.zeros_like(g) for g in full]
        for r in range(world):
            local = shard(torch.arange(5), r, world)
            for acc, g in zip(total, grads((world / 5) * losses(local).sum())):
                acc += g / world  # DDP's all-reduce mean
        for a, b in zip(total, full):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_bad_input_fails_before_any_process_starts(tmp_path):
    from mscred.errors import InputError

    with pytest.raises(InputError, match="missing.csv"):
        train_distributed(tmp_path / "missing.csv", tmp_path / "model", {"device": "cpu"}, nproc=2)
    assert not (tmp_path / "model").exists()


def _segments(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3, 5, 5)).astype(np.float32)


def test_two_gloo_ranks_train_the_weights_of_one_process(tmp_path):
    # 15 segments -> 11 windows; global batch 5 -> batches of 5, 5, 1: shards (3, 2), (3, 2) and (1, 0).
    train, val = _segments(15, 1), _segments(8, 2)
    cfg = TrainConfig(epochs=2, batch_size=5, device="cpu", seed=3, progress=False)
    torch.manual_seed(cfg.seed)
    net = MSCREDNet(TINY)
    initial = {k: v.clone() for k, v in net.state_dict().items()}
    single = Trainer(net, cfg).fit(train, val)

    try:
        history, state, info = fit_segments(TINY, cfg, train, val, nproc=2, checkpoint_dir=tmp_path, timeout=240)
    except torch.multiprocessing.ProcessExitedException as err:
        # A gloo rank used to abort at exit ("terminate called without an active exception", SIGABRT) in about
        # 1 run of 60 on the 2-core box; since ranks leave with os._exit after tearing the group down, 0 of 360
        # (benchmarks/results/stress_gloo.md). The retry, said out loud, stays as a guard.
        if err.signal_name != "SIGABRT":
            raise
        warnings.warn(f"gloo rank aborted ({err}); retrying the 2-rank run once")
        history, state, info = fit_segments(TINY, cfg, train, val, nproc=2, checkpoint_dir=tmp_path, timeout=240)

    assert info["world_size"] == 2 and info["device"] == "cpu"
    assert len(history) == len(single) == 2
    for ours, ref in zip(history, single):
        assert ours["train_loss"] == pytest.approx(ref["train_loss"], rel=1e-5)
        assert ours["val_loss"] == pytest.approx(ref["val_loss"], rel=1e-5)
    moved = max((net.state_dict()[k] - initial[k]).abs().max().item() for k in initial)
    assert moved > 1e-4  # 6 Adam steps of lr 2e-4 moved the weights: the comparison below is not vacuous
    for name, value in net.state_dict().items():
        torch.testing.assert_close(state[name], value, rtol=1e-5, atol=1e-6)
    # rank 0 wrote the checkpoint of the last epoch: the same weights
    saved = load_file(str(tmp_path / CHECKPOINT_NAME))
    for name, value in state.items():
        torch.testing.assert_close(saved[f"model.{name}"], value, rtol=0, atol=0)


def test_resumed_ddp_run_continues_from_rank_0_checkpoint(tmp_path):
    """Epoch 1 on 2 ranks, then `resume` to epoch 2 on 2 ranks: the weights of 2 uninterrupted single-process
    epochs (the checkpoint holds weights, Adam state and history; the epoch's order depends on seed + epoch only)."""
    train = _segments(13, 5)  # 9 windows, batches of 4, 4, 1
    cfg = TrainConfig(epochs=2, batch_size=4, device="cpu", seed=1, progress=False)
    torch.manual_seed(cfg.seed)
    net = MSCREDNet(TINY)
    single = Trainer(net, cfg).fit(train)

    first, _, _ = fit_segments(TINY, TrainConfig(**{**cfg.__dict__, "epochs": 1}), train, nproc=2,
                               checkpoint_dir=tmp_path, timeout=240)
    history, state, _ = fit_segments(TINY, cfg, train, nproc=2, checkpoint_dir=tmp_path, resume=True, timeout=240)

    assert len(first) == 1 and [h["epoch"] for h in history] == [1, 2]
    assert history[1]["train_loss"] == pytest.approx(single[1]["train_loss"], rel=1e-5)
    for name, value in net.state_dict().items():
        torch.testing.assert_close(state[name], value, rtol=1e-5, atol=1e-6)


def test_train_distributed_saves_the_single_process_estimator(tmp_path):
    """`mscred train --nproc 2` end to end (estimator, calibration, save on rank 0) against MSCRED.fit."""
    from mscred.data.synthetic import generate_synthetic
    from mscred.detector import MSCRED

    data = generate_synthetic(n_sensors=5, length=1200, seed=4)
    path = tmp_path / "train.csv"
    data.train.to_csv(path, index=False)
    overrides = {"epochs": 1, "batch_size": 7, "device": "cpu", "channels": TINY.channels, "progress": False}

    summary = train_distributed(path, tmp_path / "model", overrides, nproc=2,
                                checkpoint_dir=tmp_path / "model.checkpoints", timeout=240)
    ours = MSCRED.load(tmp_path / "model", device="cpu")
    ref = MSCRED(**overrides).fit(data.train.drop(columns=[c for c in ("label",) if c in data.train]))

    assert summary["world_size"] == 2 and summary["epochs"] == 1 and not summary["graphs"]
    assert not (tmp_path / "model.checkpoints").exists()  # removed once the model was saved
    assert ours.history_[0]["train_loss"] == pytest.approx(ref.history_[0]["train_loss"], rel=1e-5)
    assert ours.threshold_ == pytest.approx(ref.threshold_, rel=1e-4)
    ref_state = ref.net_.state_dict()
    for name, value in ours.net_.state_dict().items():
        torch.testing.assert_close(value, ref_state[name], rtol=1e-5, atol=1e-6)


def test_train_distributed_in_micro_batches_gives_the_whole_batch_model(tmp_path):
    """--nproc 2 with --micro-batch 2: shards of 4 and 3 windows of a batch of 7 run in parts (2 + 2, 2 + 1), only
    the last part's backward all-reducing (DDP's no_sync, which needs static_graph off): the same weights as one
    process training whole batches."""
    from mscred.data.synthetic import generate_synthetic
    from mscred.detector import MSCRED

    data = generate_synthetic(n_sensors=5, length=1200, seed=4)
    path = tmp_path / "train.csv"
    data.train.to_csv(path, index=False)
    overrides = {"epochs": 1, "batch_size": 7, "device": "cpu", "channels": TINY.channels, "progress": False}

    train_distributed(path, tmp_path / "model", {**overrides, "micro_batch": 2}, nproc=2, timeout=240)
    ours = MSCRED.load(tmp_path / "model", device="cpu")
    ref = MSCRED(**overrides).fit(data.train.drop(columns=[c for c in ("label",) if c in data.train]))

    assert ours.config.train.micro_batch == 2
    assert ours.history_[0]["train_loss"] == pytest.approx(ref.history_[0]["train_loss"], rel=1e-5)
    ref_state = ref.net_.state_dict()
    for name, value in ours.net_.state_dict().items():
        torch.testing.assert_close(value, ref_state[name], rtol=1e-5, atol=1e-6)


def test_the_torchrun_entry_says_bad_input_in_one_line(tmp_path, capsys):
    """`python -m mscred.distributed` printed click's three-line usage error, and a path it could not write as a
    traceback: it now runs its commands as `mscred` does."""
    from mscred.distributed import main

    for argv, fragment in ((["train"], "Missing argument 'DATA...'"),
                           (["train", "x.csv", "--out", ""], "an empty path"),
                           (["fleet", str(tmp_path / "nowhere"), "--out", str(tmp_path / "f")], "nowhere")):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith("mscred: error:"), err
        assert fragment in err and "Traceback" not in err
    assert main([]) == 0 and "train" in capsys.readouterr().out
