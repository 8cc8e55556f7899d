"""Weight gradients on a side CUDA stream (``mscred.ops.wgrad_stream``) are the gradients one stream computes.

CPU: the switch (on by default, MSCRED_WGRAD_STREAM=0 off) is CUDA-only, ``run`` computes in place where it may
not use the side stream, the cast-cache test ``weight_cache.made_here``, and the side-gradient convolution's
backward (data gradient here, weight gradient through ``run``) against float64 finite differences, plain and
transposed, strided and padded.
CUDA: the fused bf16 model's every gradient and loss with the switch on equal the switch off's (same cuDNN calls;
the tolerance covers atomic-order differences), the side stream really takes work, and a whole training step
captured in a CUDA graph with the switch on replays to the eager step's losses.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import weight_cache, wgrad_stream
from mscred.ops.triton import convlstm as fused_convlstm
from test_level_streams import eager_and_graphed_losses

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA or not fused_convlstm.is_available()[0],
                                reason="the side stream is a CUDA feature (needs a GPU and Triton)")


def test_switch_is_cuda_only(monkeypatch):
    monkeypatch.delenv("MSCRED_WGRAD_STREAM", raising=False)
    assert not wgrad_stream.switched(torch.zeros(1))  # a CPU tensor never goes to a stream
    monkeypatch.setenv("MSCRED_WGRAD_STREAM", "1")
    assert not wgrad_stream.switched(torch.zeros(1))


@needs_cuda
def test_switch_is_on_by_default_on_cuda(monkeypatch):
    monkeypatch.delenv("MSCRED_WGRAD_STREAM", raising=False)
    assert wgrad_stream.switched(torch.zeros(1, device="cuda"))
    monkeypatch.setenv("MSCRED_WGRAD_STREAM", "0")
    assert not wgrad_stream.switched(torch.zeros(1, device="cuda"))


def test_run_computes_in_place_when_not_allowed(monkeypatch):
    monkeypatch.setenv("MSCRED_WGRAD_STREAM", "1")
    x = torch.arange(4.0)
    with wgrad_stream.allowed(True):
        assert wgrad_stream.run(lambda: (x * 2,), (x,))[0].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert wgrad_stream.run(lambda: (x + 1,), (x,))[0].tolist() == [1.0, 2.0, 3.0, 4.0]
    wgrad_stream.join(x.device)  # nothing queued, a CPU device: no-op


def test_allowed_is_restored():
    with wgrad_stream.allowed(True):
        with wgrad_stream.allowed(False):
            assert not wgrad_stream._LOCAL.allowed
        assert wgrad_stream._LOCAL.allowed
    assert not getattr(wgrad_stream._LOCAL, "allowed", False)


def test_made_here_knows_the_cast_cache():
    a, b, other = torch.zeros(2), torch.zeros(2), torch.zeros(2)
    assert not weight_cache.made_here(a)  # no cast_once around the call
    token = weight_cache._ACTIVE.set({(1, "all"): a, (2, "x"): b})
    try:
        assert weight_cache.made_here(a, b)
        assert not weight_cache.made_here(a, other)
        assert not weight_cache.made_here(torch.zeros(2))  # equal values, another tensor
    finally:
        weight_cache._ACTIVE.reset(token)


@pytest.mark.parametrize("transposed, stride, padding", [(False, 2, (1, 1)), (False, 1, (0, 0)),
                                                          (True, 2, (0, 0)), (True, 1, (1, 0))])
def test_side_gradient_convolution_matches_finite_differences(transposed, stride, padding):
    torch.manual_seed(0)
    x = torch.randn(3, 4, 7, 6, dtype=torch.float64, requires_grad=True)
    shape = (4, 5, 3, 2) if transposed else (5, 4, 3, 2)
    w = torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    def conv(x, w):
        return wgrad_stream._SideWeightGradConv.apply(x, w, stride, padding, transposed)

    torch.autograd.gradcheck(conv, (x, w))
    # and the forward is PyTorch's own convolution
    plain = (F.conv_transpose2d(x, w, stride=stride, padding=padding) if transposed
             else F.conv2d(x, w, stride=stride, padding=padding))
    torch.testing.assert_close(conv(x, w), plain, rtol=0, atol=0)


def test_input_without_gradient_gets_none():
    x = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    y = wgrad_stream._SideWeightGradConv.apply(x, w, 1, (1, 1), False)
    (dw,) = torch.autograd.grad(y.sum(), (w,))
    expected = torch.autograd.grad(F.conv2d(x, w, padding=1).sum(), (w,))[0]
    torch.testing.assert_close(dw, expected)


def _bf16_step(net, x):
    net.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        recon = net(x)
    loss = F.mse_loss(recon.float(), x[:, -1])
    loss.backward()
    torch.cuda.synchronize()
    return loss.detach().clone(), {k: p.grad.clone() for k, p in net.named_parameters()}


@needs_cuda
@pytest.mark.parametrize("batch", [3, 32])
def test_side_stream_gradients_match_one_stream(monkeypatch, batch):
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda().train()
    x = torch.rand(batch, 5, 3, 30, 30, device="cuda")
    monkeypatch.setenv("MSCRED_WGRAD_STREAM", "0")
    ref = _bf16_step(net, x)
    monkeypatch.setenv("MSCRED_WGRAD_STREAM", "1")
    sides = []
    real_side = wgrad_stream._side
    monkeypatch.setattr(wgrad_stream, "_side", lambda device: sides.append(device) or real_side(device))
    for _ in range(2):  # twice: the second run reuses memory the first freed across streams
        sides.clear()
        ours = _bf16_step(net, x)
        # the 4 levels' ConvLSTM calls and the encoder's and decoder's cuDNN convolutions went to the side stream
        assert len(sides) >= 8, sides
        assert not wgrad_stream._PENDING  # and were joined
        torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=0)
        for k in ref[1]:  # two bf16 units in the last place: kernels that sum with atomics (encoder.conv1's
            # Triton weight gradient, the bias gradients) round in their arrival order, run to run
            scale = ref[1][k].abs().max().item() + 1e-12
            torch.testing.assert_close(ours[1][k], ref[1][k], rtol=2 ** -6, atol=2e-3 * scale,
                                       msg=lambda m, k=k: f"{k}: {m}")


@needs_cuda
def test_graphed_step_with_side_stream_replays_the_eager_losses(monkeypatch):
    monkeypatch.setenv("MSCRED_WGRAD_STREAM", "1")
    losses = eager_and_graphed_losses(bf16=True)
    torch.testing.assert_close(losses["graph"], losses["eager"], rtol=2e-3, atol=0)
