"""Micro-batches: a batch's forward and backward in parts whose gradients add up to the batch's (the same Adam step
in the memory of one part), chosen by the user or, on a CPU where the batch would not fit, by fit itself."""
from __future__ import annotations

import warnings

import pytest
import torch

from cli_helpers import run_cli, sensor_frame
from mscred.config import MSCREDConfig, ModelConfig, TrainConfig
from mscred.errors import IgnoredSettingWarning, InputError, MicroBatchWarning
from mscred.model import MSCREDNet
from mscred.train import Trainer, WindowDataset
from mscred.train_graphs import EagerStep

N = 5
TINY = dict(n_sensors=N, n_scales=3, channels=(4, 8, 8, 8))
SMALL = dict(channels=(4, 8, 8, 8), device="cpu", progress=False)


def _step_result(micro_batch, idx, dtype=torch.float64):
    """(loss, parameters before, parameters after one Adam step) of EagerStep on windows ``idx`` in micro-batches
    of ``micro_batch``."""
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(**TINY)).to(dtype)
    before = [p.detach().clone() for p in net.parameters()]
    segments = torch.rand(14, 3, N, N, generator=torch.Generator().manual_seed(1), dtype=dtype)
    data = WindowDataset(segments)
    data.segments = segments  # kept in float64 (WindowDataset holds float32)
    step = EagerStep(net, torch.optim.Adam(net.parameters(), lr=1e-2), data, False, micro_batch)
    loss = step(idx)
    return loss, before, [p.detach().clone() for p in net.parameters()]


@pytest.mark.parametrize("micro_batch", [1, 3, 4, 6])
def test_micro_batches_give_the_batch_step_in_float64(micro_batch):
    """7 windows in parts of 1, 3 (3 + 3 + 1), 4 and 6: the loss and the Adam step equal the whole batch's to
    float64 rounding (the parts' losses are weighted by 1/7, not by their own size)."""
    idx = torch.tensor([6, 0, 3, 9, 1, 4, 2])
    loss, before, params = _step_result(None, idx)
    loss_micro, _, params_micro = _step_result(micro_batch, idx)
    torch.testing.assert_close(loss_micro, loss, rtol=1e-13, atol=0)
    for got, want in zip(params_micro, params):
        torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-13)
    # the step moved every parameter: the comparison above would pass trivially otherwise
    assert all(not torch.equal(a, b) for a, b in zip(params, before))


def test_trainer_with_micro_batches_follows_the_whole_batch_run():
    """Two epochs of batch 8 in micro-batches of 3 (the last batch of 2 in one part): the same losses and weights
    as in whole batches, to float32 rounding."""
    segments = torch.rand(30, 3, N, N, generator=torch.Generator().manual_seed(0))
    runs = {}
    for micro in (None, 3):
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(**TINY))
        cfg = TrainConfig(epochs=2, batch_size=8, micro_batch=micro, progress=False, device="cpu")
        history = Trainer(net, cfg).fit(segments[:22], segments[20:])
        runs[micro] = history, net.state_dict()
    (whole, whole_state), (micro, micro_state) = runs[None], runs[3]
    for a, b in zip(whole, micro):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
        assert b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-5)
    for name, value in micro_state.items():
        torch.testing.assert_close(value, whole_state[name], rtol=1e-4, atol=1e-6)


def test_micro_batch_turns_the_graphs_off_with_a_note(monkeypatch):
    """A graph captures one whole batch's step: micro-batches run eagerly, and the note says so."""
    import mscred.train as train

    monkeypatch.setattr(train, "graphs_enabled", lambda setting, device: True)
    net = MSCREDNet(ModelConfig(**TINY))
    for asked in (None, True):   # graphs by default, or asked for: one note, the micro-batches' (not "need CUDA")
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # (said by fit, which knows the windows: not before)
            trainer = Trainer(net, TrainConfig(batch_size=8, micro_batch=2, cuda_graphs=asked, device="cpu"))
        with pytest.warns(IgnoredSettingWarning) as caught:
            trainer._plan_for(windows=64)   # (what fit plans its steps with)
        assert [str(w.message)[:43] for w in caught] == ["CUDA graphs off: micro-batches of 2 windows"]
        assert not trainer.use_graphs and trainer.micro_batch == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = Trainer(net, TrainConfig(batch_size=8, micro_batch=8, device="cpu"))  # not smaller: no micro-batch
    assert whole.use_graphs and whole.micro_batch is None


def test_ddp_micro_batch_as_large_as_the_shard_keeps_the_graphs(monkeypatch):
    """Under DDP a step runs a shard of the global batch: a micro-batch as large as the shard is no micro-batch
    (it turned the graphs off, with a note, for a slower run and no memory saved)."""
    import mscred.distributed as distributed
    import mscred.train as train

    monkeypatch.setattr(train, "graphs_enabled", lambda setting, device: True)
    for name, value in (("is_available", True), ("is_initialized", True), ("get_world_size", 2), ("get_rank", 0)):
        monkeypatch.setattr(distributed.dist, name, lambda value=value: value)
    net = MSCREDNet(ModelConfig(**TINY))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer = distributed.DistributedTrainer(net, TrainConfig(batch_size=8, micro_batch=4, device="cpu"))
    assert trainer.use_graphs and trainer.micro_batch is None
    trainer = distributed.DistributedTrainer(net, TrainConfig(batch_size=8, micro_batch=3, device="cpu"))
    with pytest.warns(IgnoredSettingWarning, match="CUDA graphs off: micro-batches of 3 windows"):
        trainer._plan_for(windows=64)
    assert not trainer.use_graphs and trainer.micro_batch == 3


def _config(n_sensors, micro=None):
    cfg = MSCREDConfig()
    cfg.model.n_sensors = n_sensors
    cfg.train.micro_batch = micro
    return cfg


def test_the_micro_batch_is_planned_against_the_memory_available():
    from mscred.detector import training_memory, training_micro_batch

    channels = (32, 64, 128, 256)
    gib = 2 ** 30
    assert training_micro_batch("t.csv", _config(200), 32, None) is None             # the OS does not say
    assert training_micro_batch("t.csv", _config(200), 32, 64 * gib) is None         # the whole batch fits
    assert training_micro_batch("t.csv", _config(200, micro=4), 32, 64 * gib) == 4   # a set micro-batch is kept
    with pytest.warns(MicroBatchWarning, match=r"t.csv: training 200 sensors at batch 32 needs "
                                               r"~18.\d GiB .* 8 GiB is available: each batch runs in micro-batches "
                                               r"of (\d+) window\(s\), the same training in \d+ passes per batch"):
        planned = training_micro_batch("t.csv", _config(200), 32, 8 * gib)
    # the largest that fits the estimate
    assert (training_memory(200, 32, channels, 5, per_pass=planned) <= 8 * gib
            < training_memory(200, 32, channels, 5, per_pass=planned + 1))
    with pytest.raises(InputError, match=rf"in micro-batches of 16 needs .*; --micro-batch {planned} "
                                         rf"\(micro_batch={planned}\) fits"):
        training_micro_batch("t.csv", _config(200, micro=16), 32, 8 * gib)
    with pytest.raises(InputError, match="even one window does not fit: fewer sensors, or a GPU"):
        training_micro_batch("t.csv", _config(200), 32, 2 ** 28)
    # two DDP ranks on one machine: each runs half the batch in half the memory
    with pytest.warns(MicroBatchWarning, match="at batch 16 in each of 2 processes") as caught:
        half = training_micro_batch("t.csv", _config(200), 32, 8 * gib, world_size=2)
    assert half < planned and "micro-batches of" in str(caught[0].message)
    # two fleet processes (one process group, each its own entity): whole batches each, in half the memory
    with pytest.warns(MicroBatchWarning, match="at batch 32 in each of 2 processes"):
        fleet = training_micro_batch("t.csv", _config(200), 32, 8 * gib, world_size=1, processes=2)
    assert fleet == half   # the same memory a process, the same largest pass
    assert training_micro_batch("t.csv", _config(200), 32, 2 * 64 * gib, world_size=1, processes=2) is None
    # a set micro-batch as large as the batch is the batch: said as such when it does not fit
    with pytest.raises(InputError, match="training 200 sensors at batch 32 needs"):
        training_micro_batch("t.csv", _config(200, micro=100), 32, 8 * gib)


def test_fit_trains_in_micro_batches_where_the_batch_does_not_fit(monkeypatch, tmp_path):
    """fit on a CPU that cannot hold a batch trains anyway, in micro-batches (a note says so), to the same model
    as with the memory to spare; the saved settings keep micro_batch unset, for the next machine to decide."""
    import mscred.detector as detector
    from mscred.detector import MSCRED, training_memory

    X = sensor_frame(400, N)
    whole = MSCRED(epochs=1, batch_size=8, **SMALL).fit(X)
    # memory for passes of 3 windows of 8
    monkeypatch.setattr(detector, "available_memory", lambda: int(training_memory(N, 8, (4, 8, 8, 8), 5, 3)) + 1)
    with pytest.warns(MicroBatchWarning, match=r"micro-batches of 3 window\(s\), the same training in 3 passes per batch"):
        micro = MSCRED(epochs=1, batch_size=8, **SMALL).fit(X)
    assert micro.history_[0]["train_loss"] == pytest.approx(whole.history_[0]["train_loss"], rel=1e-5)
    assert micro.threshold_ == pytest.approx(whole.threshold_, rel=1e-4)
    assert micro.config_.train.micro_batch is None
    micro.save(tmp_path / "model")
    assert MSCRED.load(tmp_path / "model").config.train.micro_batch is None


def test_micro_batch_setting_is_checked_and_runtime_only():
    from mscred.detector import MSCRED

    for bad in (0, -2, 2.5, "4", True):
        with pytest.raises(InputError, match="train.micro_batch .*must be None \\(the whole batch\\) or an integer"):
            MSCRED(micro_batch=bad).fit(sensor_frame(300, N))
    fitted = MSCRED(epochs=1, **SMALL).fit(sensor_frame(300, N))
    fitted.set_params(micro_batch=4)   # the same model, trained in less memory: the fit stays
    assert fitted.threshold_ > 0


def test_cli_micro_batch_option(capsys, tmp_path):
    data = tmp_path / "train.csv"
    sensor_frame(300, N).to_csv(data, index=False)
    code, out, err = run_cli(capsys, "train", data, "--out", tmp_path / "m", "--epochs", "1", "--batch-size", "8",
                             "--micro-batch", "3", "--device", "cpu", "--quiet")
    assert code == 0, err
    code, _, err = run_cli(capsys, "train", data, "--out", tmp_path / "m2", "--micro-batch", "0")
    assert code == 2 and "--micro-batch" in err and "Traceback" not in err


def test_cpu_scoring_batch_shrinks_with_the_sensors_squared():
    """128 windows of 200 sensors would hold ~17 GB of activations in one CPU scoring pass (3.3 KB per window per
    sensor squared, measured): the batch keeps them within INFER_BYTES_CPU, down to one window."""
    from mscred import detector

    assert detector.inference_batch("cpu", 32, 40) == 128
    small = detector.inference_batch("cpu", 32, 200)
    assert small * detector.SCORE_BYTES_PER_WINDOW_SENSOR2 * 200 ** 2 <= detector.INFER_BYTES_CPU
    assert (small + 1) * detector.SCORE_BYTES_PER_WINDOW_SENSOR2 * 200 ** 2 > detector.INFER_BYTES_CPU
    assert detector.inference_batch("cpu", 32, 5000) == 1
    assert detector.inference_batch("cuda", 32, 200) == detector.INFER_BATCH  # the GPU's rule is its own


class _NoStep:
    """An optimizer whose step leaves the parameters alone: the gradients are what is compared."""

    def step(self):
        pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused backend's kernels and CUDA graphs need a GPU")
@pytest.mark.parametrize("backend", ["reference", "fused"])
def test_micro_batch_gradients_on_cuda_add_up_to_the_batch(backend):
    """On the GPU at n = 30, the fused kernels' custom autograd ops included (their weight gradients must add up
    over the passes like any leaf's): 24 windows in parts of 7 give the whole batch's gradients (compared, not
    weights after Adam steps, which amplify the sign of a gradient near 0)."""
    from mscred.train_graphs import accumulated_step

    segments = torch.rand(40, 3, 30, 30, generator=torch.Generator().manual_seed(0)).cuda()
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, n_scales=3, backend=backend)).cuda()
    data = WindowDataset(segments)
    idx = torch.randperm(len(data), generator=torch.Generator().manual_seed(1))[:24].cuda()
    weight = torch.full((24,), 1 / 24, device="cuda")
    grads = {}
    for micro in (None, 7):
        net.zero_grad(set_to_none=True)
        loss = accumulated_step(net, _NoStep(), data, idx, weight, False, micro)
        grads[micro] = loss, [p.grad.clone() for p in net.parameters()]
    (loss, whole), (loss_micro, parts) = grads[None], grads[7]
    # Float32 on the GPU convolves in TF32 (cuDNN, and the Triton kernels' dots): ~1e-3 relative noise, element by
    # element up to 30% on near-zero gradients (measured on the H200, results/gpu_suite_1203b/). A part left out or
    # counted twice moves a tensor's gradient by ~7/24 of its norm; the check is 100x below that.
    torch.testing.assert_close(loss_micro, loss, rtol=1e-4, atol=0)
    for got, want in zip(parts, whole):
        assert (got - want).norm() <= 3e-3 * want.norm() + 1e-12, ((got - want).norm(), want.norm())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_micro_batch_on_cuda_trains_eagerly_with_the_note():
    segments = torch.rand(40, 3, 30, 30, generator=torch.Generator().manual_seed(0)).cuda()
    net = MSCREDNet(ModelConfig(n_sensors=30, n_scales=3, backend="fused"))
    trainer = Trainer(net, TrainConfig(epochs=1, batch_size=24, micro_batch=7, progress=False, device="cuda"))
    with pytest.warns(IgnoredSettingWarning, match="CUDA graphs off: micro-batches of 7 windows"):
        history = trainer.fit(segments[:30], segments[28:])
    assert not trainer.use_graphs and history[0]["train_loss"] > 0
