"""The fused model's four levels on side CUDA streams (``mscred.level_streams``) compute what one stream computes.

CPU: the one-stream fallback and its argument check. CUDA: the fused n = 30 model, float32 with TF32 off, gives the
same output, loss and every gradient with and without side streams (same kernels; only the bias gradients'
atomic adds may sum in another order); and a whole training step captured in a CUDA graph with side streams
replays to the eager step's losses.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred import level_streams
from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops.triton import convlstm as fused_convlstm

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA or not fused_convlstm.is_available()[0],
                                reason="side streams are a CUDA feature (needs a GPU and Triton)")


def test_cpu_runs_levels_last_first_on_one_stream(monkeypatch):
    monkeypatch.setenv("MSCRED_LEVEL_STREAMS", "1")  # asked for, yet a CPU tensor stays on the one-stream path
    monkeypatch.delenv("MSCRED_LEVEL_ORDER", raising=False)  # the default order: the last level first
    calls = []
    fns = [lambda x, i=i: calls.append(i) or x * (i + 1) for i in range(4)]
    xs = [torch.full((2,), float(i)) for i in range(4)]
    assert not level_streams.enabled(xs[0])
    out = level_streams.run_levels(fns, xs)
    assert calls == [3, 2, 1, 0]
    for i, y in enumerate(out):
        torch.testing.assert_close(y, xs[i] * (i + 1), rtol=0, atol=0)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="2 functions for 3 inputs"):
        level_streams.run_levels([abs, abs], [torch.zeros(1)] * 3)


def test_streams_are_opt_in(monkeypatch):
    monkeypatch.delenv("MSCRED_LEVEL_STREAMS", raising=False)
    assert not level_streams.enabled(torch.zeros(1))
    monkeypatch.setenv("MSCRED_LEVEL_STREAMS", "0")
    assert not level_streams.enabled(torch.zeros(1))


def _forward_backward(net, x):
    net.zero_grad(set_to_none=True)
    recon = net(x)
    loss = F.mse_loss(recon, x[:, -1])
    loss.backward()
    torch.cuda.synchronize()
    return recon.detach().clone(), loss.detach().clone(), {k: p.grad.clone() for k, p in net.named_parameters()}


@needs_cuda
@pytest.mark.parametrize("batch", [1, 7, 32])
def test_side_streams_match_one_stream(monkeypatch, strict_float32, batch):
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
    x = torch.rand(batch, 5, 3, 30, 30, device="cuda")
    monkeypatch.setenv("MSCRED_LEVEL_STREAMS", "0")
    ref = _forward_backward(net, x)
    monkeypatch.setenv("MSCRED_LEVEL_STREAMS", "1")
    assert level_streams.enabled(x)
    for _ in range(2):  # twice: the second run reuses memory the first freed across streams
        ours = _forward_backward(net, x)
        torch.testing.assert_close(ours[0], ref[0], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(ours[1], ref[1], rtol=1e-6, atol=0)
        for k in ref[2]:
            torch.testing.assert_close(ours[2][k], ref[2][k], rtol=1e-5, atol=1e-8, msg=lambda m, k=k: f"{k}: {m}")


@needs_cuda
def test_graphed_step_with_side_streams_replays_the_eager_losses(monkeypatch, strict_float32):
    monkeypatch.setenv("MSCRED_LEVEL_STREAMS", "1")
    losses = eager_and_graphed_losses(bf16=False)
    torch.testing.assert_close(losses["graph"], losses["eager"], rtol=1e-5, atol=0)


def eager_and_graphed_losses(bf16: bool) -> dict[str, torch.Tensor]:
    """The losses of 4 training steps of a fused n = 30 model, 16 windows a batch, the last batch 11 (padded inside
    the graph): {"eager": EagerStep's, "graph": GraphedStep's}, each from the same seed (also for
    test_wgrad_stream)."""
    from mscred.train import WindowDataset
    from mscred.train_graphs import EagerStep, GraphedStep

    data = WindowDataset(torch.rand(68, 3, 30, 30, device="cuda"), 5)  # 64 windows
    batches = [torch.arange(i * 16, i * 16 + 16, device="cuda") for i in range(4)]
    batches[-1] = batches[-1][:11]  # the last one padded inside the graph
    losses = {}
    for name, make in (("eager", lambda n, o: EagerStep(n, o, data, bf16=bf16)),
                       ("graph", lambda n, o: GraphedStep(n, o, data, 16, bf16=bf16, cudnn_benchmark=False))):
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
        opt = torch.optim.Adam(net.parameters(), lr=2e-4, capturable=name == "graph")
        step = make(net, opt)
        losses[name] = torch.stack([step(idx) for idx in batches]).cpu()
    return losses
