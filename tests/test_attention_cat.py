"""The training step's attention outputs written into the decoder's skip concatenations (``ops/attention_cat.py``,
MSCRED_ATTENTION_CAT=1).

The attention's output as the upper half of a new concatenation buffer holds the ordinary output's values and leaves
the lower half unwritten; the decoder's bias + SELU fills that lower half and hands back the buffer, with the values
and gradients of the copying concatenation bit for bit; a skip that is not such a half takes the copying path; and
the fused model trains to the same loss and gradients bit for bit with the switch on and off. The kernels run under
the Triton interpreter on the CPU (conftest), float32; the bf16 model at full size on CUDA."""
from __future__ import annotations

import pytest
import torch
from model_runs import fused_training_step

from mscred.ops import attention_cat
from mscred.ops import reference as ref_ops
from mscred.ops.triton import attention
from mscred.ops.triton import bias_act_cat as bac

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


def _hidden_states(B, T, C, H, W, seed, dtype=torch.float32):
    """(B, T, C, H, W) stored channels-last per step, as the fused ConvLSTM hands them to the attention."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, H, W, C, generator=g, dtype=dtype).to(DEVICE).permute(0, 1, 4, 2, 3)


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_ATTENTION_CAT", setting)
    assert attention_cat.enabled() is on


def test_recover_finds_the_buffer_and_only_it():
    buf = _cl(torch.randn(3, 2 * 5, 4, 6))
    found = attention_cat.recover(buf[:, 5:], 5)
    assert found.data_ptr() == buf.data_ptr() and found.shape == buf.shape and torch.equal(found, buf)
    assert attention_cat.recover(buf[:, 5:], 4) is None  # another lower width
    assert attention_cat.recover(buf[:, :5], 5) is None  # the lower half: nothing below it
    assert attention_cat.recover(_cl(torch.randn(3, 5, 4, 6)), 5) is None  # a tensor of its own
    assert attention_cat.recover(_cl(torch.randn(3, 15, 4, 6))[:, 10:], 5) is None  # a third of a wider one
    assert attention_cat.recover(torch.randn(3, 5, 4), 5) is None


@pytest.mark.parametrize("B, T, C, H, W", [(2, 5, 32, 7, 7), (3, 4, 5, 3, 6), (1, 5, 64, 1, 4)])
def test_the_attention_writes_the_upper_half(B, T, C, H, W, monkeypatch):
    """Awkward channel counts and maps (5 channels, a 1-row map): the output in the upper half equals the ordinary
    output bit for bit and the float64 reference; the lower half is left as it was (NaN); the same gradient."""
    real = attention._output_like
    monkeypatch.setattr(attention, "_output_like", lambda h, cat: real(h, cat).fill_(float("nan")))
    h = _hidden_states(B, T, C, H, W, seed=B * C + W)
    dout = _cl(torch.randn(B, C, H, W, generator=torch.Generator().manual_seed(1))).to(DEVICE)
    outs, grads = [], []
    for cat in (False, True):
        leaf = h.detach().clone().requires_grad_()
        out = attention.temporal_attention(leaf, cat=cat)
        out.backward(dout)
        outs.append(out.detach())
        grads.append(leaf.grad)
    plain, half = outs
    assert torch.equal(half, plain) and torch.equal(grads[1], grads[0])
    torch.testing.assert_close(half.double(), ref_ops.temporal_attention(h.double()), rtol=1e-5, atol=1e-6)
    buf = attention_cat.recover(half, C)
    assert buf is not None and torch.isnan(buf[:, :C]).all()


@pytest.mark.parametrize("B, C, H, crop", [(2, 32, 7, 1), (3, 5, 4, 1)])
def test_the_decoder_fills_the_lower_half(B, C, H, crop):
    """bias_act_cat with the skip the upper half of its buffer: the buffer comes back (no new tensor) holding the
    copying concatenation's values; y's, the bias's and the skip's gradients bit for bit those of the copying path."""
    g = torch.Generator().manual_seed(B + C)
    y = _cl(torch.randn(B, C, H + 2 * crop, H + 2 * crop, generator=g)).to(DEVICE)
    b = torch.randn(C, generator=g).to(DEVICE)
    skip_values = _cl(torch.randn(B, C, H, H, generator=g)).to(DEVICE)
    dout = torch.randn(B, 2 * C, H, H, generator=g).to(DEVICE)
    results = []
    for in_cat in (False, True):
        leaf = skip_values.detach().clone().requires_grad_()
        if in_cat:  # the attention's way: a fresh (B, 2C, H, W) buffer, the skip its upper half
            buf = torch.full((B, 2 * C, H, H), float("nan"), device=DEVICE).contiguous(
                memory_format=torch.channels_last)
            skip = _IntoUpperHalf.apply(leaf, buf)
        else:
            skip = leaf
        y_, b_ = (t.detach().clone().requires_grad_() for t in (y, b))
        out = bac.bias_act_cat(y_, b_, True, crop, crop, H, H, skip, in_cat)
        out.backward(dout)
        if in_cat:
            assert out.data_ptr() == buf.data_ptr() and out.stride() == buf.stride()
        results.append((out.detach(), y_.grad, b_.grad, leaf.grad))
    for name, a, b in zip(("out", "dy", "dbias", "dskip"), *results):
        assert torch.equal(a, b), name


class _IntoUpperHalf(torch.autograd.Function):
    """x copied into the upper channel half of ``buf``, which is returned as that half (a view of a buffer the
    function does not own in the test's eyes, as the attention's output is); the gradient passes through."""

    @staticmethod
    def forward(ctx, x, buf):
        buf[:, x.shape[1]:].copy_(x)
        return buf[:, x.shape[1]:]

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def test_a_skip_not_in_a_buffer_is_copied():
    """``skip_in_cat`` with a skip of its own (the attention fell back to a dense output): the copying path."""
    g = torch.Generator().manual_seed(3)
    y = _cl(torch.randn(2, 4, 7, 7, generator=g)).to(DEVICE)
    b, skip = torch.randn(4, generator=g).to(DEVICE), _cl(torch.randn(2, 4, 5, 5, generator=g)).to(DEVICE)
    out = bac.bias_act_cat(y, b, True, 1, 1, 5, 5, skip, True)
    assert torch.equal(out, bac.bias_act_cat(y, b, True, 1, 1, 5, 5, skip, False))
    assert out.data_ptr() != skip.data_ptr()


def _off_and_on(run, monkeypatch):
    """(``run()`` with MSCRED_ATTENTION_CAT=0, with =1, the skips written in place, the skips copied)."""
    monkeypatch.setenv("MSCRED_ATTENTION_CAT", "0")
    ref = run()
    monkeypatch.setenv("MSCRED_ATTENTION_CAT", "1")
    into, copied = [], []
    real_into, real_copy = bac._BiasActIntoCat.apply, bac._BiasActCat.apply
    monkeypatch.setattr(bac._BiasActIntoCat, "apply", lambda *a: into.append(a[2].shape) or real_into(*a))
    monkeypatch.setattr(bac._BiasActCat, "apply", lambda *a: copied.append(a[2].shape) or real_copy(*a))
    return ref, run(), into, copied


@pytest.mark.parametrize("fold, encoder_xh", [("0", "0"), ("1", "1")])
def test_the_fused_model_trains_the_same_with_it(fold, encoder_xh, monkeypatch, strict_float32):
    """The fused float32 model at n = 12: MSCRED_ATTENTION_CAT on gives the loss and every gradient of off bit for
    bit, with all three skips written in place and none copied; with the attention folded into the ConvLSTM (and
    the encoder writing [x, h], ``ops.encoder_xh``) and not."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    monkeypatch.setenv("MSCRED_LSTM_ATTN_FOLD", fold)
    monkeypatch.setenv("MSCRED_ENCODER_XH", encoder_xh)
    ref, ours, into, copied = _off_and_on(
        fused_training_step(12, 2, torch.enable_grad, DEVICE), monkeypatch)
    assert [s[1:] for s in into] == [(128, 3, 3), (64, 6, 6), (32, 12, 12)] and not copied
    assert torch.equal(ours[0], ref[0])
    for k in ref[1]:
        assert torch.equal(ours[1][k], ref[1][k]), k


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the bf16 training step as the H200 runs it: CUDA")
def test_the_bf16_training_model_takes_it_on_cuda(monkeypatch):
    """n = 30 under bf16 autocast, as the training step runs: all three skips written in place; the same loss and
    gradients as with the switch off, up to the order of the bias gradients' atomic adds."""
    ref, ours, into, copied = _off_and_on(
        fused_training_step(30, 4, lambda: torch.autocast("cuda", dtype=torch.bfloat16), "cuda"),
        monkeypatch)
    assert [s[1:] for s in into] == [(128, 8, 8), (64, 15, 15), (32, 30, 30)] and not copied
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=0)
    for k in ref[1]:
        torch.testing.assert_close(ours[1][k], ref[1][k], rtol=2e-2, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}")
