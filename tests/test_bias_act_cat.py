"""``bias_act_cat`` (``ops/triton/bias_act_cat.py``): the decoder's bias + SELU written into its skip concatenation
equals ``cat_channels(bias_act(...), skip)`` -- values and the gradients of y, the bias and the skip -- and the
float64 reference; the fused model's decoder gives the same loss and gradients with the switch on and off.
The kernels run under the Triton interpreter on the CPU (conftest), float32; float64 takes the reference path."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.ops.concat import cat_channels
from mscred.ops.triton import bias_act as ba
from mscred.ops.triton import bias_act_cat as bac

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


def _inputs(B, C, S, H, crop, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    y = _cl(torch.randn(B, C, H + 2 * crop, H + 2 * crop, generator=g, dtype=torch.float64)).to(DEVICE, dtype)
    b = torch.randn(C, generator=g, dtype=torch.float64).to(DEVICE, dtype)
    skip = _cl(torch.randn(B, S, H, H, generator=g, dtype=torch.float64)).to(DEVICE, dtype)
    dout = torch.randn(B, C + S, H, H, generator=g, dtype=torch.float64).to(DEVICE, dtype)
    return y, b, skip, dout


def _fwd_bwd(fn, y, b, skip, dout):
    y, b, skip = (t.detach().clone().requires_grad_() for t in (y, b, skip))
    out = fn(y, b, skip)
    out.backward(dout)
    return out.detach(), y.grad, b.grad, skip.grad


@pytest.mark.parametrize("selu", [True, False])
@pytest.mark.parametrize("B, C, S, H, crop", [(2, 32, 32, 7, 1), (3, 5, 7, 4, 0), (1, 8, 3, 5, 2)])
def test_equals_bias_act_then_cat_and_the_reference(B, C, S, H, crop, selu):
    y, b, skip, dout = _inputs(B, C, S, H, crop, torch.float32, seed=B * 7 + C + S + crop)
    ours = _fwd_bwd(lambda y, b, s: bac.bias_act_cat(y, b, selu, crop, crop, H, H, s), y, b, skip, dout)
    apart = _fwd_bwd(lambda y, b, s: cat_channels(ba.bias_act(y, b, selu, crop, crop, H, H), s), y, b, skip, dout)
    oracle = _fwd_bwd(lambda y, b, s: torch.cat([ba.reference(y, b, selu, crop, crop, H, H), s], 1),
                      *(t.double() for t in (y, b, skip, dout)))
    assert ours[0].is_contiguous(memory_format=torch.channels_last)
    for name, o, a, r in zip(("out", "dy", "dbias", "dskip"), ours, apart, oracle):
        torch.testing.assert_close(o, a, rtol=1e-6, atol=1e-6, msg=lambda m, n=name: f"{n} against apart: {m}")
        torch.testing.assert_close(o.double(), r, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def test_other_inputs_take_bias_act_then_cat():
    """float64 (the oracle dtype): the two ops apart, exactly; an NCHW y in float32: the same numbers, dy NCHW."""
    y, b, skip, _ = _inputs(2, 4, 4, 5, 1, torch.float64, seed=3)
    want = torch.cat([ba.reference(y, b, True, 1, 1, 5, 5), skip], 1)
    torch.testing.assert_close(bac.bias_act_cat(y, b, True, 1, 1, 5, 5, skip), want, rtol=0, atol=0)
    y32 = y.float().contiguous().requires_grad_()
    b32, s32 = b.float(), skip.float()
    out = bac.bias_act_cat(y32, b32, True, 1, 1, 5, 5, s32)
    torch.testing.assert_close(out, want.float(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    assert y32.grad.is_contiguous() and y32.grad.shape == y32.shape
    with pytest.raises(ValueError):
        bac.bias_act_cat(y32, b32, True, 1, 1, 9, 9, s32)  # the crop outside y


@pytest.mark.parametrize("setting, on", [(None, True), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_DECODER_CAT_EPILOGUE", setting)
    assert bac.enabled() is on


def _off_and_on(run, monkeypatch):
    """(``run()`` with MSCRED_DECODER_CAT_EPILOGUE=0, the same with =1, the y tensors the kernel path took)."""
    monkeypatch.setenv("MSCRED_DECODER_CAT_EPILOGUE", "0")
    ref = run()
    monkeypatch.setenv("MSCRED_DECODER_CAT_EPILOGUE", "1")
    calls = []
    real = bac._BiasActCat.apply
    monkeypatch.setattr(bac._BiasActCat, "apply", lambda *a: calls.append(a[0]) or real(*a))
    return ref, run(), calls


def test_the_fused_decoder_computes_the_same_with_it(monkeypatch, strict_float32):
    """The fused model (n = 7, float32) with MSCRED_DECODER_CAT_EPILOGUE off and on: the same reconstruction, loss
    and every gradient (the same kernels; only the concatenation's first copy is gone), and the path really taken."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=7, backend="fused")).to(DEVICE)
    x = torch.rand(2, 5, 3, 7, 7, device=DEVICE)

    def run():
        net.zero_grad(set_to_none=True)
        recon = net(x)
        loss = F.mse_loss(recon, x[:, -1])
        loss.backward()
        return recon.detach(), loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters()}

    ref, ours, calls = _off_and_on(run, monkeypatch)
    assert len(calls) == 3  # deconv4, deconv3, deconv2
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(ours[1], ref[1], rtol=1e-6, atol=0)
    for k in ref[2]:
        torch.testing.assert_close(ours[2][k], ref[2][k], rtol=1e-5, atol=1e-8, msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the bf16 training decoder as the graphed step runs it: CUDA")
def test_the_bf16_training_decoder_takes_it_on_cuda(monkeypatch):
    """n = 30 under bf16 autocast, as the training step runs: all three levels take the kernel path (cuDNN's
    channels-last output, bf16 attention outputs), the same loss and gradients as with the switch off."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
    x = torch.rand(4, 5, 3, 30, 30, device="cuda")

    def run():
        net.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(net(x).float(), x[:, -1])
        loss.backward()
        torch.cuda.synchronize()
        return loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters()}

    ref, ours, calls = _off_and_on(run, monkeypatch)
    assert [y.dtype for y in calls] == [torch.bfloat16] * 3
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=0)
    for k in ref[1]:  # the bias gradients' atomic adds may sum in another order
        torch.testing.assert_close(ours[1][k], ref[1][k], rtol=2e-2, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}")
