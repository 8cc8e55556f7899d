"""Trainer and predict on tiny data: windows as views, seeded reproducibility, checkpoints, resume, early stopping.

The CUDA-graph tests need a GPU and are skipped on CPU.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open

from mscred.config import ModelConfig, TrainConfig
from mscred.errors import InputError, NoteWarning
from mscred.model import MSCREDNet
from mscred.train import Trainer, WindowDataset, predict
from mscred.train_checkpoint import CHECKPOINT_NAME
from mscred.train_graphs import bf16_native

N = 6
SMALL = dict(n_sensors=N, channels=(4, 8, 8, 8))




def _segments(count=30, seed=0):
    return torch.rand(count, 3, N, N, generator=torch.Generator().manual_seed(seed))


def _net(seed=0, **kw):
    torch.manual_seed(seed)
    return MSCREDNet(ModelConfig(**{**SMALL, **kw}))


def _cfg(**kw):
    base = dict(epochs=2, batch_size=8, progress=False, device="cpu")
    return TrainConfig(**{**base, **kw})


def test_window_dataset_views_and_batches():
    seg = np.random.default_rng(0).random((9, 3, N, N), dtype=np.float32)
    data = WindowDataset(seg, steps=5)
    assert len(data) == 5
    assert np.shares_memory(data.segments.numpy(), seg)  # float32 input is not copied
    assert data[2].data_ptr() == data.segments[2].data_ptr()  # a window is a view
    batch = data.batch(torch.tensor([4, 0, 2]))
    assert batch.shape == (3, 5, 3, N, N)
    np.testing.assert_array_equal(batch[0].numpy(), seg[4:9])
    np.testing.assert_array_equal(batch[2].numpy(), seg[2:7])
    with pytest.raises(IndexError):
        data[5]


def test_loss_is_mse_to_last_step_and_decreases():
    seg = _segments()
    net = _net()
    with torch.no_grad():
        x = WindowDataset(seg).batch(torch.arange(26))
        before = torch.mean((net(x) - x[:, -1]) ** 2).item()
    history = Trainer(net, _cfg(epochs=3, lr=3e-3)).fit(seg, seg)
    assert [r["epoch"] for r in history] == [1, 2, 3]
    # Validation on the training data with unchanged weights would equal `before`; after training it is lower.
    assert history[-1]["val_loss"] < before
    for r in history:
        assert r["seconds"] > 0 and r["windows_per_s"] > 0 and np.isfinite(r["train_loss"])


def test_validation_loss_equals_manual_mse():
    seg = _segments()
    net = _net()
    trainer = Trainer(net, _cfg(epochs=1))
    history = trainer.fit(seg[:20], seg[18:])
    with torch.no_grad():
        x = WindowDataset(seg[18:]).batch(torch.arange(8))
        want = torch.mean((net(x) - x[:, -1]) ** 2).item()
    assert history[0]["val_loss"] == pytest.approx(want, rel=1e-5)


def test_same_seed_identical_losses_and_weights():
    seg = _segments()
    runs = []
    for _ in range(2):
        net = _net(seed=3)
        history = Trainer(net, _cfg(seed=7)).fit(seg, seg[20:])
        runs.append(([(r["train_loss"], r["val_loss"]) for r in history], net.state_dict()))
    assert runs[0][0] == runs[1][0]
    for k in runs[0][1]:
        assert torch.equal(runs[0][1][k], runs[1][1][k]), k
    # A different seed shuffles differently.
    net = _net(seed=3)
    other = Trainer(net, _cfg(seed=8)).fit(seg, seg[20:])
    assert [r["train_loss"] for r in other] != [loss for loss, _ in runs[0][0]]


def test_checkpoint_every_epoch_and_resume_is_exact(tmp_path):
    seg = _segments()
    straight = _net()
    Trainer(straight, _cfg(epochs=2)).fit(seg, seg[20:], checkpoint_dir=tmp_path / "a")

    first = _net()
    h1 = Trainer(first, _cfg(epochs=1)).fit(seg, seg[20:], checkpoint_dir=tmp_path / "b")
    ckpt = tmp_path / "b" / CHECKPOINT_NAME
    assert ckpt.exists() and len(h1) == 1
    assert [p.name for p in (tmp_path / "b").iterdir()] == [CHECKPOINT_NAME]  # no temporary left behind
    with safe_open(str(ckpt), framework="pt") as f:
        meta = json.loads(f.metadata()["mscred"])
        keys = set(f.keys())
    assert meta["epoch"] == 1 and meta["history"] == h1
    assert "model.encoder.conv1.weight" in keys and "optim.0.exp_avg" in keys and "rng.cpu" in keys

    # A fresh process would build a fresh net (different init) and resume: the checkpoint overrides it.
    resumed = _net(seed=99)
    with pytest.warns(NoteWarning, match=r"resuming from .*checkpoint.safetensors after epoch 1 of 2"):
        h2 = Trainer(resumed, _cfg(epochs=2)).fit(seg, seg[20:], checkpoint_dir=tmp_path / "b", resume=True)
    assert len(h2) == 2 and h2[0] == h1[0]
    for k, v in straight.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k

    # Resuming a finished run trains nothing more.
    again = _net(seed=5)
    with pytest.warns(NoteWarning, match="after epoch 2 of 2"):
        h3 = Trainer(again, _cfg(epochs=2)).fit(seg, None, checkpoint_dir=tmp_path / "b", resume=True)
    assert h3 == h2
    for k, v in straight.state_dict().items():
        assert torch.equal(v, again.state_dict()[k]), k


def test_checkpoint_snapshot_is_a_copy():
    """The writer thread gets copies: training that goes on (in-place Adam updates) cannot tear a checkpoint."""
    from mscred.train_checkpoint import checkpoint_contents

    net = _net()
    opt = torch.optim.Adam(net.parameters())
    sum((p ** 2).sum() for p in net.parameters()).backward()
    opt.step()
    tensors, _ = checkpoint_contents(net, opt, 1, [])
    before = {k: v.clone() for k, v in tensors.items()}
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    opt.step()
    for key, value in tensors.items():
        assert torch.equal(value, before[key]), key


def test_background_writer_keeps_order_and_reports_errors():
    import time

    from mscred.train_checkpoint import BackgroundWriter

    writer, done = BackgroundWriter(), []
    writer.submit(lambda: (time.sleep(0.05), done.append(1)))
    writer.submit(done.append, 2)  # waits for the first job
    assert writer.join() is None and done == [1, 2]
    writer.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        writer.submit(done.append, 3)  # the failed write surfaces at the next submit ...
    assert done == [1, 2]
    writer.submit(lambda: 1 / 0)
    assert isinstance(writer.join(), ZeroDivisionError)  # ... or at join
    assert writer.join() is None


def test_failed_checkpoint_write_fails_fit(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the checkpoint folder should be")
    with pytest.raises(InputError, match="blocked is a file, not a folder"):   # (once an OSError from mkdir)
        Trainer(_net(), _cfg(epochs=1)).fit(_segments(count=12), checkpoint_dir=blocked)


def test_resume_without_checkpoint_starts_fresh(tmp_path):
    seg = _segments(count=12)
    with pytest.warns(NoteWarning, match="resume: no checkpoint in .* yet; training from the start"):
        h = Trainer(_net(), _cfg(epochs=1)).fit(seg, None, checkpoint_dir=tmp_path, resume=True)
    assert len(h) == 1 and h[0]["val_loss"] is None


def test_damaged_checkpoint_is_input_error(tmp_path):
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="checkpoint"):
        Trainer(_net(), _cfg(epochs=1)).fit(_segments(count=12), None, checkpoint_dir=tmp_path, resume=True)


def test_early_stopping_with_patience():
    seg = _segments(count=12)
    # lr 0: the validation loss never improves after epoch 1, so patience 2 stops after epoch 3.
    history = Trainer(_net(), _cfg(epochs=10, lr=0.0, early_stopping_patience=2)).fit(seg, seg)
    assert len(history) == 3
    assert history[0]["val_loss"] == history[2]["val_loss"]


def test_predict_matches_forward_and_batches():
    seg = _segments(count=14)
    net = _net()
    recon = predict(net, seg, batch_size=4, device="cpu")
    assert recon.dtype == np.float32 and recon.shape == (10, 3, N, N)
    with torch.no_grad():
        want = net(WindowDataset(seg).batch(torch.arange(10))).numpy()
    np.testing.assert_allclose(recon, want, rtol=1e-5, atol=1e-6)


def test_divergence_stops_before_checkpoint(tmp_path):
    seg = _segments(count=12)
    Trainer(_net(), _cfg(epochs=1)).fit(seg, checkpoint_dir=tmp_path)
    good = (tmp_path / CHECKPOINT_NAME).read_bytes()
    bad = seg.clone()
    bad[3, 0, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="diverged in epoch 2"), pytest.warns(NoteWarning):
        Trainer(_net(), _cfg(epochs=2)).fit(bad, checkpoint_dir=tmp_path, resume=True)
    assert (tmp_path / CHECKPOINT_NAME).read_bytes() == good


def test_too_few_segments_is_input_error():
    with pytest.raises(InputError):
        Trainer(_net(), _cfg()).fit(_segments(count=4))


def test_progress_bar_runs(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stderr as a terminal: the live bar path
    Trainer(_net(), _cfg(epochs=1, progress=True)).fit(_segments(count=10))
    assert "epoch 1/1" in capsys.readouterr().err


def test_progress_logged_writes_each_epoch_once(capsys, monkeypatch):
    # Piped into a log, rich would print the bars' last state when they stop, after the epoch lines.
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    Trainer(_net(), _cfg(epochs=2, progress=True)).fit(_segments(count=10))
    err = capsys.readouterr().err
    assert err.count("epoch 1/2") == 1 and err.count("epoch 2/2") == 1, err
    assert "train loss" in err and "━" not in err


def test_gather_into_equals_batch_in_any_order():
    seg = torch.rand(12, 3, N, N, generator=torch.Generator().manual_seed(3))
    data = WindowDataset(seg[1:], steps=5)  # a view with a storage offset: the strided windows view must honour it
    idx = torch.tensor([6, 0, 3, 3, 5])
    out = torch.full((5, 5, 3, N, N), float("nan"))
    data.gather_into(idx, out)
    torch.testing.assert_close(out, data.batch(idx), rtol=0, atol=0)
    for j, k in enumerate(idx.tolist()):
        torch.testing.assert_close(out[j], seg[1 + k:1 + k + 5], rtol=0, atol=0)
    with pytest.raises(IndexError):
        data.gather_into(torch.tensor([len(data)]), out[:1])


def test_graph_replay_wrapper_gathers_before_replay():
    # _GatherThenReplay stands where the CUDAGraph stood (ShardGraphedStep calls step.graph.replay()): the static
    # input must hold the windows of static_idx when the graph runs.
    from mscred.train_graphs import _GatherThenReplay

    data = WindowDataset(_segments(count=14), steps=5)
    static_idx = torch.zeros(4, dtype=torch.long)
    static_x = data.batch(static_idx).clone()
    seen = []

    class Graph:
        def replay(self):
            seen.append(static_x.clone())

    wrapper = _GatherThenReplay(Graph(), data, static_idx, static_x)
    static_idx.copy_(torch.tensor([9, 2, 5, 0]))
    wrapper.replay()
    torch.testing.assert_close(seen[0], data.batch(torch.tensor([9, 2, 5, 0])), rtol=0, atol=0)


def test_cuda_graphs_ignored_on_cpu():
    # (bf16 is no longer ignored on every CPU: see the bf16 tests below)
    seg = _segments(count=12)
    a, b = _net(), _net()
    ha = Trainer(a, _cfg(epochs=1)).fit(seg)
    from mscred.errors import IgnoredSettingWarning

    with pytest.warns(IgnoredSettingWarning, match="--cuda-graphs .* ignored: CUDA graphs need a CUDA device"):
        trainer = Trainer(b, _cfg(epochs=1, cuda_graphs=True))
    hb = trainer.fit(seg)
    assert ha[0]["train_loss"] == hb[0]["train_loss"]


def test_autotune_only_when_enough_steps_are_planned():
    from mscred.train_graphs import AUTOTUNE_MIN_STEPS, autotune_worthwhile

    assert not autotune_worthwhile(None, AUTOTUNE_MIN_STEPS - 1)
    assert autotune_worthwhile(None, AUTOTUNE_MIN_STEPS)
    assert autotune_worthwhile(True, 1) and not autotune_worthwhile(False, 10 ** 9)
    # fit decides from its epochs x batches per epoch: 2 x ceil(8 / 8) steps here, far below the break-even
    seg = _segments(count=12)
    trainer = Trainer(_net(), _cfg())
    trainer.fit(seg)
    assert trainer.autotune is False
    trainer = Trainer(_net(), _cfg(cudnn_benchmark=True, epochs=1))
    trainer.fit(seg)
    assert trainer.autotune is True


@pytest.mark.parametrize("start", [False, True])
def test_convolution_autotuning_is_scoped(start):
    """The flag is on inside (when enabled) and back to what it was after, also when the body raises."""
    from mscred.train_graphs import convolution_autotuning

    before = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = start
        with convolution_autotuning(True):
            assert torch.backends.cudnn.benchmark is True
        assert torch.backends.cudnn.benchmark is start
        with pytest.raises(RuntimeError), convolution_autotuning(True):
            raise RuntimeError("capture failed")
        assert torch.backends.cudnn.benchmark is start
        with convolution_autotuning(False):
            assert torch.backends.cudnn.benchmark is start
    finally:
        torch.backends.cudnn.benchmark = before


def test_benchmark_limit_setting(monkeypatch):
    """MSCRED_CUDNN_BENCHMARK_LIMIT: unset -> None (PyTorch's limit), a count -> that count, else an error that
    names the variable; with cuDNN, the limit holds inside convolution_autotuning and is restored after."""
    from mscred.train_graphs import benchmark_limit, convolution_autotuning

    monkeypatch.delenv("MSCRED_CUDNN_BENCHMARK_LIMIT", raising=False)
    assert benchmark_limit() is None
    monkeypatch.setenv("MSCRED_CUDNN_BENCHMARK_LIMIT", "0")
    assert benchmark_limit() == 0
    before = torch.backends.cudnn.benchmark_limit
    with convolution_autotuning(True):
        assert torch.backends.cudnn.benchmark_limit == (None if before is None else 0)
    assert torch.backends.cudnn.benchmark_limit == before
    monkeypatch.setenv("MSCRED_CUDNN_BENCHMARK_LIMIT", "all")
    with pytest.raises(ValueError, match="MSCRED_CUDNN_BENCHMARK_LIMIT"):
        benchmark_limit()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA-graph capture needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("bf16", [False, True])
def test_cuda_graph_training_tracks_eager(bf16):
    # 30 segments -> 26 windows, batch 8: the last batch (2 windows) goes through the padded, masked path.
    seg = _segments()
    eager, graphed = _net(), _net()
    he = Trainer(eager, _cfg(device="cuda", epochs=3, bf16=bf16)).fit(seg, seg[20:])
    hg = Trainer(graphed, _cfg(device="cuda", epochs=3, bf16=bf16, cuda_graphs=True)).fit(seg, seg[20:])
    tol = 2e-2 if bf16 else 1e-4
    for re, rg in zip(he, hg):
        assert rg["train_loss"] == pytest.approx(re["train_loss"], rel=tol)
        assert rg["val_loss"] == pytest.approx(re["val_loss"], rel=tol)
    # Adam divides by sqrt(v): a weight whose gradients are tiny moves by ~lr per step whatever their rounding, so
    # weights are compared with an absolute tolerance of a fraction of the 12 steps' total lr (2.4e-3).
    atol = 2e-3 if bf16 else 2e-5
    for k, v in eager.state_dict().items():
        torch.testing.assert_close(graphed.state_dict()[k], v, rtol=tol * 10, atol=atol)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("backend,bf16", [("reference", False), ("fused", True)])
def test_cuda_graph_full_size_n30_batch128(backend, bf16):
    # The shape that crashed H2's capture on the H200 (n = 30, B = 128, paper channels): a device-side assert in
    # the captured window gather (reference) / a silent death (fused + bf16). 300 segments -> 296 windows: two
    # full batches and a padded one of 40.
    seg = torch.rand(300, 3, 30, 30, generator=torch.Generator().manual_seed(0))
    nets = []
    for graphs in (False, True):
        torch.manual_seed(0)
        nets.append(MSCREDNet(ModelConfig(n_sensors=30, backend=backend)))
        cfg = _cfg(device="cuda", epochs=2, batch_size=128, bf16=bf16, cuda_graphs=graphs)
        hist = Trainer(nets[-1], cfg).fit(seg, seg[250:])
        if graphs:
            tol = 3e-2 if bf16 else 1e-3
            for re, rg in zip(eager_hist, hist):
                assert np.isfinite(rg["train_loss"])
                assert rg["train_loss"] == pytest.approx(re["train_loss"], rel=tol)
                assert rg["val_loss"] == pytest.approx(re["val_loss"], rel=tol)
        eager_hist = hist
    graphed = predict(nets[1], seg, 128, "cuda", bf16=bf16, cuda_graphs=True)
    eager = predict(nets[1], seg, 128, "cuda", bf16=bf16)
    np.testing.assert_allclose(graphed, eager, rtol=3e-2 if bf16 else 1e-3, atol=3e-2 if bf16 else 1e-4)


@pytest.mark.gpu
@needs_cuda
def test_cuda_graph_resume_and_predict(tmp_path):
    seg = _segments()
    straight = _net()
    Trainer(straight, _cfg(device="cuda", epochs=2, cuda_graphs=True)).fit(seg)
    part = _net()
    Trainer(part, _cfg(device="cuda", epochs=1, cuda_graphs=True)).fit(seg, checkpoint_dir=tmp_path)
    resumed = _net(seed=1)
    with pytest.warns(NoteWarning, match="after epoch 1 of 2"):
        Trainer(resumed, _cfg(device="cuda", epochs=2, cuda_graphs=True)).fit(seg, checkpoint_dir=tmp_path,
                                                                             resume=True)
    for k, v in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[k], v, rtol=1e-5, atol=1e-6)
    eager = predict(straight, seg, 8, "cuda")
    graphed = predict(straight, seg, 8, "cuda", cuda_graphs=True)
    # cuDNN convolutions use TF32 by default and pick algorithms per batch size: the last, partial batch (2
    # windows eagerly, padded to 8 in the graph) differs at the 1e-4 level.
    np.testing.assert_allclose(graphed, eager, rtol=1e-3, atol=1e-4)


# bf16 autocast on a CPU: used where oneDNN computes bf16 natively (AVX512-BF16, AMX), ignored (float32) elsewhere.
def test_bf16_on_a_cpu_follows_native_support(monkeypatch):
    from mscred import train_graphs

    monkeypatch.setattr(train_graphs, "bf16_native", lambda device: False)
    monkeypatch.setattr("mscred.train.bf16_native", lambda device: False)
    from mscred.errors import IgnoredSettingWarning

    with pytest.warns(IgnoredSettingWarning, match="--bf16 .* ignored: this CPU has no native bf16"):
        assert Trainer(_net(), _cfg(bf16=True, device="cpu")).bf16 is False
    assert not isinstance(train_graphs.autocast(torch.device("cpu"), True), torch.autocast)
    monkeypatch.setattr("mscred.train.bf16_native", lambda device: True)
    assert Trainer(_net(), _cfg(bf16=True, device="cpu")).bf16 is True


@pytest.mark.skipif(not bf16_native(torch.device("cpu")),
                    reason="this CPU has no native bf16 (AVX512-BF16 / AMX): --bf16 is ignored here")
def test_bf16_on_a_native_cpu_trains_and_scores_close_to_float32():
    segments = _segments(count=40)
    fits = {}
    for bf16 in (False, True):
        trainer = Trainer(_net(seed=3), _cfg(epochs=2, bf16=bf16, device="cpu"))
        assert trainer.bf16 is bf16
        trainer.fit(segments)
        fits[bf16] = (trainer.history[-1]["train_loss"], predict(trainer.net, segments, device="cpu", bf16=bf16))
    (loss32, recon32), (loss16, recon16) = fits[False], fits[True]
    assert np.isfinite(recon16).all() and recon16.dtype == np.float32
    assert abs(loss16 - loss32) / loss32 < 0.05
    assert np.linalg.norm(recon16 - recon32) / np.linalg.norm(recon32) < 0.05


def test_validation_from_shared_segments_equals_gathered_windows():
    """The CPU Trainer validates consecutive windows through forward_windows (their shared segments): the same
    reconstructions and losses as gathering each window; any other index set is gathered."""
    from mscred.train_graphs import EagerInference

    net = _net().eval()
    data = WindowDataset(_segments(count=20))
    shared, gathered = EagerInference(net, data, windows=True), EagerInference(net, data)
    for idx in (torch.arange(3, 11), torch.tensor([0, 5, 2])):
        (r1, l1), (r2, l2) = shared(idx), gathered(idx)
        torch.testing.assert_close(r1, r2, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(l1, l2, rtol=1e-5, atol=1e-7)
