"""ops/triton/lstm_wgrad.py: the training ConvLSTM's input and recurrent weight gradients from one read of the gate
gradients, against float64 convolution_backward (PyTorch's own weight gradient), at awkward sizes; and the fused
training step with it switched on (MSCRED_LSTM_WGRAD=1) against the default."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops.triton import lstm_wgrad
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                reason="the kernel needs CUDA or Triton's CPU interpreter (TRITON_INTERPRET=1)")
CL = torch.channels_last


def _buffers(T, B, C, H, W, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    O = 4 * C
    dpre = torch.randn(T * B, O, H, W, generator=g)
    xp = torch.randn(T * B, C, H + k - 1, W + k - 1, generator=g)
    hp = torch.randn((T - 1) * B, C, H + k - 1, W + k - 1, generator=g) if T > 1 else None
    put = lambda t: None if t is None else t.to(DEVICE, dtype).contiguous(memory_format=CL)  # noqa: E731
    return put(dpre), put(xp), put(hp)


def _oracle(dpre, images, w_shape):
    w = torch.empty(w_shape, dtype=torch.float64, device=dpre.device)
    return torch.ops.aten.convolution_backward(dpre.double(), images.double(), w, None, [1, 1], [0, 0], [1, 1],
                                               False, [0, 0], 1, [False, True, False])[1]


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("T, B, C, H, W, k", [(5, 3, 4, 6, 7, 2), (2, 1, 3, 5, 5, 2), (1, 2, 4, 4, 4, 2),
                                              (3, 2, 4, 5, 4, 3), (4, 2, 20, 3, 3, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_both_weight_gradients_equal_the_convolution_backward(T, B, C, H, W, k, dtype):
    """Time-major images (n = t*B + b); dW_h from steps 1.. only (T = 1: none); channels not a power of two (3,
    20: 4C = 80 output channels across two 64-blocks), both kernel sizes. float32: IEEE products, so within 1e-5 of
    the float64 oracle; bf16: within twice PyTorch's own bf16 weight gradient's error (+ a floor)."""
    dpre, xp, hp = _buffers(T, B, C, H, W, k, dtype, seed=T * 100 + B * 10 + C + k)
    dw_x, dw_h = lstm_wgrad.lstm_weight_grads(dpre, xp, hp, B, k, dtype)
    shape = (4 * C, C, k, k)
    assert dw_x.shape == shape and dw_x.dtype == dtype and dw_x.is_contiguous(memory_format=CL)
    pairs = [(dw_x, dpre, xp)] + ([(dw_h, dpre[B:], hp)] if T > 1 else [])
    assert (dw_h is None) == (T == 1)
    for got, d, images in pairs:
        want = _oracle(d, images, shape)
        if dtype == torch.float32:
            assert _rel(got, want) < 1e-5
        else:
            theirs = torch.ops.aten.convolution_backward(d, images, torch.empty(shape, dtype=dtype, device=DEVICE),
                                                         None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                         [False, True, False])[1]
            assert _rel(got, want) <= 2 * _rel(theirs, want) + 2e-3, (_rel(got, want), _rel(theirs, want))


def test_refuses_buffers_that_do_not_fit():
    dpre, xp, hp = _buffers(2, 2, 4, 4, 4, 2, torch.float32, seed=1)
    with pytest.raises(ValueError, match="do not border"):
        lstm_wgrad.lstm_weight_grads(dpre, xp[..., :-1], hp, 2, 2, torch.float32)
    with pytest.raises(ValueError, match="is not the"):
        lstm_wgrad.lstm_weight_grads(dpre, xp, hp[:1], 2, 2, torch.float32)
    with pytest.raises(ValueError, match="channels-last"):
        lstm_wgrad.lstm_weight_grads(dpre.contiguous(), xp, hp, 2, 2, torch.float32)
    assert not lstm_wgrad.suits(dpre.double(), xp.double(), hp.double())  # float64: PyTorch's convolutions


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # the interpreter's numpy exp
def test_training_step_with_the_kernel_matches_the_default(monkeypatch):
    """The fused float32 training step with MSCRED_LSTM_WGRAD=1: the same output, every gradient within float32
    rounding of the default's (the sums run in another order); the kernel ran once per level."""
    cfg = ModelConfig(n_sensors=10, channels=(4, 8, 8, 16), backend="fused")
    x = torch.rand(3, 5, 3, 10, 10, device=DEVICE)
    calls, real = [], lstm_wgrad.lstm_weight_grads
    monkeypatch.setattr(lstm_wgrad, "lstm_weight_grads", lambda *a: calls.append(1) or real(*a))
    results = []
    for flag in ("1", "0"):
        monkeypatch.setenv("MSCRED_LSTM_WGRAD", flag)
        torch.manual_seed(0)
        net = MSCREDNet(cfg).to(DEVICE)
        out = net(x)
        F.mse_loss(out, x[:, -1]).backward()
        results.append((out.detach(), {k: p.grad for k, p in net.named_parameters()}))
    assert len(calls) == 4
    (out1, g1), (out0, g0) = results
    torch.testing.assert_close(out1, out0, rtol=0, atol=0)
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], rtol=1e-4, atol=1e-6, msg=k)
