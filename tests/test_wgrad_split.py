"""Weight gradients split into k calls over slices of the images (``wgrad_stream.weight_grad``,
MSCRED_WGRAD_SPLIT=k, opt-in): the same gradient to rounding.

CPU: the switch's parsing; ``weight_grad`` against one float64 call for k = 1, 2, 3 and more pieces than images, on
plain, strided, padded and transposed convolutions; the bf16 sum of two pieces rounded once; the side-gradient
convolution's backward against finite differences with the split on; the fused model's loss and gradients (the
ConvLSTM levels' weight gradients go through ``weight_grad``) with k = 3 against k = 1, under the interpreter.
CUDA: the bf16 model at full size, k = 2 against k = 1, to rounding.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from model_runs import assert_step_close, fused_training_step

from mscred.ops import wgrad_stream
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
VARIABLE = wgrad_stream.SPLIT_VARIABLE


@pytest.mark.parametrize("setting, count", [(None, 1), ("", 1), ("1", 1), (" 3 ", 3)])
def test_split_count(setting, count, set_env):
    set_env(VARIABLE, setting)
    assert wgrad_stream.split_count() == count


@pytest.mark.parametrize("setting", ["0", "-2", "two", "1.5"])
def test_split_count_rejects_what_is_not_a_positive_integer(setting, monkeypatch):
    monkeypatch.setenv(VARIABLE, setting)
    with pytest.raises(ValueError, match=VARIABLE):
        wgrad_stream.split_count()


CONVS = {  # name: (weight shape, (stride, padding, dilation, transposed, output padding, groups))
    "plain": ((6, 4, 3, 3), ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)),
    "strided, padded": ((6, 4, 3, 2), ([2, 2], [1, 0], [1, 1], False, [0, 0], 1)),
    "transposed": ((4, 6, 2, 2), ([2, 2], [0, 0], [1, 1], True, [0, 0], 1)),
}


def _operands(name: str, images: int, dtype=torch.float64):
    shape, conv = CONVS[name]
    gen = torch.Generator().manual_seed(images)
    x = torch.randn(images, 4, 7, 9, generator=gen, dtype=dtype)
    w = torch.randn(*shape, generator=gen, dtype=dtype)
    stride, padding, _, transposed = conv[:4]
    y = (F.conv_transpose2d(x, w, stride=stride, padding=padding) if transposed
         else F.conv2d(x, w, stride=stride, padding=padding))
    return torch.randn(y.shape, generator=gen, dtype=dtype), x, w, conv


@pytest.mark.parametrize("name", sorted(CONVS))
@pytest.mark.parametrize("images, pieces", [(5, "1"), (5, "2"), (5, "3"), (2, "7")])
def test_weight_grad_is_one_calls_gradient(name, images, pieces, monkeypatch):
    grad, x, w, conv = _operands(name, images)
    monkeypatch.setenv(VARIABLE, "1")
    want = wgrad_stream.weight_grad(grad, x, w, conv)
    torch.testing.assert_close(want, torch.ops.aten.convolution_backward(
        grad, x, w, None, *conv, [False, True, False])[1], rtol=0, atol=0)
    monkeypatch.setenv(VARIABLE, pieces)
    got = wgrad_stream.weight_grad(grad, x, w, conv)
    assert got.shape == w.shape and got.dtype == w.dtype
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_two_bf16_pieces_are_summed_in_float32_and_rounded_once(monkeypatch):
    grad, x, w, conv = (t.bfloat16() if isinstance(t, torch.Tensor) else t for t in _operands("plain", 6))
    halves = [torch.ops.aten.convolution_backward(g, xs, w, None, *conv, [False, True, False])[1]
              for g, xs in zip(grad.tensor_split(2), x.tensor_split(2))]
    monkeypatch.setenv(VARIABLE, "2")
    got = wgrad_stream.weight_grad(grad, x, w, conv)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, (halves[0].float() + halves[1].float()).bfloat16(), rtol=0, atol=0)


@pytest.mark.parametrize("transposed", [False, True])
def test_side_gradient_convolution_with_the_split_matches_finite_differences(transposed, monkeypatch):
    monkeypatch.setenv(VARIABLE, "3")
    torch.manual_seed(0)
    x = torch.randn(4, 4, 6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(*((4, 3, 2, 2) if transposed else (3, 4, 3, 2)), dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda x, w: wgrad_stream._SideWeightGradConv.apply(x, w, 2, (0, 0), transposed),
                             (x, w))


@pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                    reason="the fused training layout needs the Triton kernels (CUDA, or the CPU interpreter)")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_fused_model_trains_the_same_with_it(monkeypatch, strict_float32):
    """CPU: float32, every level on the concatenated path and on the per-step path (n = 12, batch 3: slices of 5 and
    10 images), k = 3. CUDA: the bf16 step at n = 30, batch 4, k = 2. The loss and every gradient to rounding, and
    every ConvLSTM level's weight gradients really split. (Not bit for bit: the split sums in another order.)"""
    counts = []
    real = wgrad_stream.split_count
    monkeypatch.setattr(wgrad_stream, "split_count", lambda: counts.append(real()) or counts[-1])
    if DEVICE == "cuda":
        run, pieces, bf16 = fused_training_step(
            30, 4, lambda: torch.autocast("cuda", dtype=torch.bfloat16), DEVICE), "2", True
    else:
        run, pieces, bf16 = fused_training_step(12, 3, contextlib.nullcontext, DEVICE), "3", False
    results = []
    for concat in ("0", "100000"):  # every level on the [x, h] buffers' one call / on the two calls of w_x and w_h
        monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", concat)
        for setting in ("1", pieces):
            monkeypatch.setenv(VARIABLE, setting)
            counts.clear()
            results.append(run())
            assert counts and set(counts) == {int(setting)}, counts
            assert len(counts) >= 4  # (at least) one call a level
    for ref, ours in (results[:2], results[2:]):
        assert_step_close(ours, ref, bf16)


@pytest.mark.parametrize("setting, value", [(None, 0.0), ("", 0.0), ("10", 10.0), (" 2.5 ", 2.5)])
def test_split_min_gflop(setting, value, set_env):
    set_env(wgrad_stream.SPLIT_MIN_VARIABLE, setting)
    assert wgrad_stream.split_min_gflop() == value


@pytest.mark.parametrize("setting", ["-1", "ten", "nan"])
def test_split_min_gflop_rejects_what_is_not_a_size(setting, monkeypatch):
    monkeypatch.setenv(wgrad_stream.SPLIT_MIN_VARIABLE, setting)
    with pytest.raises(ValueError, match=wgrad_stream.SPLIT_MIN_VARIABLE):
        wgrad_stream.split_min_gflop()


@pytest.mark.parametrize("name", sorted(CONVS))
def test_gradients_below_the_threshold_are_one_call(name, monkeypatch):
    """The threshold against the call's own multiply-adds: just above them it is one call, at them it is split."""
    grad, x, w, conv = _operands(name, 5)
    macs = (x if conv[3] else grad).numel() * w[0].numel()
    counts = []
    real = torch.ops.aten.convolution_backward
    monkeypatch.setattr(wgrad_stream.torch.ops.aten, "convolution_backward",
                        lambda *a: counts.append(1) or real(*a), raising=False)
    monkeypatch.setenv(VARIABLE, "3")
    for gflop, calls in ((2 * macs * 1.001 / 1e9, 1), (2 * macs / 1e9, 3)):
        monkeypatch.setenv(wgrad_stream.SPLIT_MIN_VARIABLE, repr(gflop))
        counts.clear()
        wgrad_stream.weight_grad(grad, x, w, conv)
        assert len(counts) == calls, (gflop, counts)
