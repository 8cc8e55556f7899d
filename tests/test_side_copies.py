"""Level 2's copies beside the chain (``ops/side_copies.py``, MSCRED_LSTM_SIDE_COPIES=1) change no number.

CPU: opt-in, and never for CPU tensors. CUDA: the fused n = 30 model (level 2 on the concatenated-gates path, whose
forward copies x into [x, h] and whose backward copies each dx_t out) gives the same output, loss and gradients
with the copies on a side stream as on one (the same kernels; the bias gradients' atomic adds may sum in another
order), the side stream really used; and a whole training step captured in a CUDA graph with them replays to the
eager step's losses.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import side_copies
from mscred.ops.triton import convlstm as fused_convlstm

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available() or not fused_convlstm.is_available()[0],
                                reason="side streams are a CUDA feature (needs a GPU and Triton)")


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_opt_in_and_never_on_the_cpu(setting, on, monkeypatch):
    if setting is None:
        monkeypatch.delenv("MSCRED_LSTM_SIDE_COPIES", raising=False)
    else:
        monkeypatch.setenv("MSCRED_LSTM_SIDE_COPIES", setting)
    assert not side_copies.enabled(torch.zeros(1))
    with side_copies.beside(torch.zeros(1), ()) as side:
        assert side is None
    if torch.cuda.is_available():
        assert side_copies.enabled(torch.zeros(1, device="cuda")) is on


def _forward_backward(net, x, bf16: bool):
    net.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
        recon = net(x)
        loss = F.mse_loss(recon.float(), x[:, -1])
    loss.backward()
    torch.cuda.synchronize()
    return recon.detach().clone(), loss.detach().clone(), {k: p.grad.clone() for k, p in net.named_parameters()}


@needs_cuda
@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("batch", [3, 32])
def test_the_model_computes_the_same_with_the_copies_beside(batch, bf16, monkeypatch, strict_float32):
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
    x = torch.rand(batch, 5, 3, 30, 30, device="cuda")
    monkeypatch.setenv("MSCRED_LSTM_SIDE_COPIES", "0")
    ref = _forward_backward(net, x, bf16)
    monkeypatch.setenv("MSCRED_LSTM_SIDE_COPIES", "1")
    used = []
    real = side_copies._side
    monkeypatch.setattr(side_copies, "_side", lambda device: used.append(device) or real(device))
    for _ in range(2):  # twice: the second run reuses memory the first freed across streams
        ours = _forward_backward(net, x, bf16)
        torch.testing.assert_close(ours[0], ref[0], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(ours[1], ref[1], rtol=1e-6, atol=0)
        for k in ref[2]:
            torch.testing.assert_close(ours[2][k], ref[2][k], rtol=1e-5 if not bf16 else 1e-3, atol=1e-8,
                                       msg=lambda m, k=k: f"{k}: {m}")
    assert len(used) >= 2 * 6  # each run: level 2's forward copies and its five steps' dx copies


@needs_cuda
def test_graphed_step_with_the_copies_beside_replays_the_eager_losses(monkeypatch, strict_float32):
    from mscred.train import WindowDataset
    from mscred.train_graphs import EagerStep, GraphedStep

    monkeypatch.setenv("MSCRED_LSTM_SIDE_COPIES", "1")
    data = WindowDataset(torch.rand(68, 3, 30, 30, device="cuda"), 5)  # 64 windows
    batches = [torch.arange(i * 16, i * 16 + 16, device="cuda") for i in range(4)]
    batches[-1] = batches[-1][:11]  # the last one padded inside the graph
    losses = {}
    for name, make in (("eager", lambda n, o: EagerStep(n, o, data)),
                       ("graph", lambda n, o: GraphedStep(n, o, data, 16, cudnn_benchmark=False))):
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
        opt = torch.optim.Adam(net.parameters(), lr=2e-4, capturable=name == "graph")
        step = make(net, opt)
        losses[name] = torch.stack([step(idx) for idx in batches]).cpu()
    torch.testing.assert_close(losses["graph"], losses["eager"], rtol=1e-5, atol=0)
