"""The training step's attention outputs written into the decoder's skip concatenations (``ops/attention_cat.py``,
MSCRED_ATTENTION_CAT=1).

The attention's output as the upper half of a new concatenation buffer holds the ordinary output's values and leaves
the lower half unwritten; the decoder's bias + SELU fills that lower half and hands back the buffer, with the values
and gradients of the copying concatenation bit for bit; a skip that is not such a half takes the copying path; and
the fused model trains to the same loss and gradients bit for bit with the switch on and off. The kernels run under
the Triton interpreter on the CPU (conftest), float32; the bf16 model at full size on CUDA. On CUDA the model's "bit
for bit" reads "to rounding" (atomic adds, cuDNN's choices: ``model_runs.assert_same_step``)."""
from __future__ import annotations

import pytest
import torch
from model_runs import assert_same_step, fused_training_step, step_channels

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


@pytest.mark.parametrize("setting, on", [(None, True), ("0", False), ("1", True)])
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
            # the skip's gradient compact, as the attention's backward reads it without a copy of its own
            assert leaf.grad.is_contiguous(memory_format=torch.channels_last)
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


@pytest.mark.parametrize("B, C, H, crop, selu", [(2, 32, 7, 1, True), (3, 5, 4, 0, False), (1, 9, 3, 2, True)])
def test_the_backward_copies_the_skip_gradient_out(B, C, H, crop, selu):
    """``bias_act_fused_backward_cat``: dy and dbias of the concatenation's lower half bit for bit as
    ``bias_act_fused_backward`` gives them, and its upper half copied out exactly, compact and channels-last (awkward
    channel counts, crops, a batch of one); opcheck of its schema and fake."""
    from mscred.ops.triton import bias_act as ba

    g = torch.Generator().manual_seed(B * C + H)
    out = _cl(torch.randn(B, C, H, H, generator=g)).to(DEVICE)
    bias = torch.randn(C, generator=g).to(DEVICE)
    dcat = _cl(torch.randn(B, 2 * C, H, H, generator=g)).to(DEVICE)
    Y = H + 2 * crop
    dy, db, dskip = ba.bias_act_fused_backward_cat(dcat, out, bias, selu, crop, crop, Y, Y, True)
    want_dy, want_db = ba.bias_act_fused_backward(dcat[:, :C], out, bias, selu, crop, crop, Y, Y, True)
    assert torch.equal(dy, want_dy)
    torch.testing.assert_close(db, want_db, rtol=1e-5, atol=1e-6)  # (float32 atomic adds: any order on a GPU)
    assert torch.equal(dskip, dcat[:, C:]) and dskip.is_contiguous(memory_format=torch.channels_last)
    torch.library.opcheck(ba.bias_act_fused_backward_cat, (dcat, out, bias, selu, crop, crop, Y, Y, True),
                          test_utils=("test_schema", "test_faketensor"))
    with pytest.raises(ValueError, match="gradient for a"):
        ba.bias_act_fused_backward_cat(dcat[:, 1:], out, bias, selu, crop, crop, Y, Y, True)


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
    c1, c2, c3, _ = step_channels(DEVICE)
    assert [s[1:] for s in into] == [(c3, 3, 3), (c2, 6, 6), (c1, 12, 12)] and not copied
    assert_same_step(ours, ref)


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


def test_sm90_code_of_the_backward_copies_in_the_same_pass():
    """Compiled for the H200 here (tests/sm90_compile.py) at level 1's decoder shape (bf16, 32 channels, a crop):
    the kernel that also copies the skip's gradient has one more load and one more store for each store of dy, and
    nothing else in global memory."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    from mscred.ops.triton import bias_act as ba

    block_p, block_c, _ = ba._launch(128 * 30 * 30, 32, ba.BWD_TILES, ba.BWD_BLOCK)
    common = dict(g_sc=1, o_sc=1, d_sc=1, SELU=True, CDT="tl.float32", BLOCK_P=block_p, BLOCK_C=block_c,
                  TILES=ba.BWD_TILES, BORDER=True, HWO=32 * 32, WO=32)
    counts = []
    for kernel, extra, pointers in (
            ("_bias_act_bwd_const_kernel", dict(g2_sc=1, HAS_G2=False), ("g_ptr", "g2_ptr", "o_ptr", "d_ptr")),
            ("_bias_act_bwd_cat_kernel", dict(k_sc=1), ("g_ptr", "o_ptr", "d_ptr", "k_ptr"))):
        config = dict(constants=dict(common, **extra), pointers={p: "*bf16" for p in pointers},
                      num_warps=ba.BWD_WARPS)
        lines = sm90_compile.sass("mscred.ops.triton.bias_act", kernel, config).splitlines()
        counts.append((sum("LDG" in ln for ln in lines), sum("STG" in ln for ln in lines)))
    (loads, stores), (cat_loads, cat_stores) = counts
    assert stores and cat_stores == 2 * stores and cat_loads == loads + stores, counts
