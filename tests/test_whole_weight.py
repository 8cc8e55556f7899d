"""The large levels' gate weight cast whole and handed out as its two halves (the weight cache's "xh" target,
``ops/weight_cache.py``; ``convlstm_concat.whole_weight_target``, MSCRED_LSTM_WHOLE_WEIGHT=1).

The halves are views of one channels-last tensor, so ``convlstm_concat`` finds the whole weight in their memory,
forward and backward, instead of concatenating them; their gradients go back as two parts. The values are the same
as the split casts', so the bf16 training step gives the same loss and gradients bit for bit with the switch on and
off (the kernels under the Triton interpreter on the CPU, conftest)."""
from __future__ import annotations

import pytest
import torch
from model_runs import fused_training_step, off_and_on

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import weight_cache
from mscred.ops.triton import convlstm_concat
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CL = torch.channels_last


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_LSTM_WHOLE_WEIGHT", setting)
    set_env("MSCRED_LSTM_CONCAT_MIN_PIXELS", None)
    # only the levels on the concatenated path (maps of at least MIN_PIXELS pixels) want the whole weight
    assert convlstm_concat.whole_weight_target(15, 15) is on
    assert convlstm_concat.whole_weight_target(8, 8) is False


@pytest.mark.parametrize("setting, parts", [(None, ["x", "h"] * 4), ("1", ["xh", "xh", "x", "h", "x", "h"])])
def test_the_model_asks_for_the_whole_weight_at_levels_1_2(setting, parts, set_env):
    """n = 30: levels 1-2 (30 x 30, 15 x 15) take the concatenated path; levels 3-4 keep their split casts."""
    set_env("MSCRED_LSTM_WHOLE_WEIGHT", setting)
    set_env("MSCRED_LSTM_CONCAT_MIN_PIXELS", None)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused"))
    targets = net._cast_targets(30)
    assert [part for _, part, _ in targets[8:]] == parts
    assert all(part == "all" for _, part, _ in targets[:8])
    assert net.encoder.level_sizes(30) == [30, 15, 8, 4]


def _weights(device: str = "cpu"):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(8, 5, 2, 2, generator=g).to(device).requires_grad_()  # a gate weight: x half 3, h half 2
    b = torch.randn(4, 3, 3, 3, generator=g).to(device).requires_grad_()  # a whole convolution weight
    return a, b


def test_whole_of_finds_only_the_halves_of_one_tensor():
    w = torch.randn(8, 5, 2, 2).contiguous(memory_format=CL)
    whole = weight_cache.whole_of(w[:, :3], w[:, 3:])
    assert whole is not None and torch.equal(whole, w) and whole.data_ptr() == w.data_ptr()
    assert whole.is_contiguous(memory_format=CL)
    x, h = w[:, :3].contiguous(memory_format=CL), w[:, 3:].contiguous(memory_format=CL)
    assert weight_cache.whole_of(x, h) is None                     # two tensors of their own
    assert weight_cache.whole_of(w[:, 3:], w[:, :3]) is None       # the halves swapped
    assert weight_cache.whole_of(w[:, :2], w[:, 3:]) is None       # not adjacent
    v = torch.randn(8, 5, 2, 2)                                     # NCHW: the halves are no channel slices of CL
    assert weight_cache.whole_of(v[:, :3], v[:, 3:]) is None
    other = torch.randn(8, 5, 2, 2).contiguous(memory_format=CL)   # same strides, another tensor
    assert weight_cache.whole_of(w[:, :3], other[:, 3:]) is None


@pytest.mark.parametrize("pack, parts", [("1", "1"), ("1", "0"), ("0", "1")])
def test_xh_target_hands_out_views_of_the_whole(pack, parts, monkeypatch):
    """The casts of an "xh" target are its halves' values, views of one channels-last whole; the masters'
    gradients are the halves' gradients concatenated, a missing half as zeros -- by every backward path (the
    gradients read in place, concatenated first, the PyTorch ops' index maps where the masters are not packed)."""
    monkeypatch.setenv("MSCRED_WEIGHT_PACK", pack)
    monkeypatch.setenv("MSCRED_WEIGHT_GRAD_PARTS", parts)
    a, b = _weights(DEVICE)
    targets = [(b, "all", 0), (a, "xh", 3)]
    plan = weight_cache.plan_for(targets)
    assert plan.splits == [0, 3] and (plan.packed is not None) == (pack == "1" and runs_fused(a))
    assert [tuple(s) for s in plan.grad_shapes] == [(4, 3, 3, 3), (8, 3, 2, 2), (8, 2, 2, 2)]
    for drop in (None, "x", "h"):
        a.grad = b.grad = None
        with weight_cache.cast_once(targets, plan, torch.float64):
            whole, wx, wh = (weight_cache.lookup(b), weight_cache.lookup(a, "x"), weight_cache.lookup(a, "h"))
            assert weight_cache.made_here(wx, wh)
        for got, want in ((whole, b), (wx, a[:, :3]), (wh, a[:, 3:])):
            assert got.dtype == torch.float64 and torch.equal(got, want.double())
        assert not wx.is_contiguous(memory_format=CL)  # a view into the whole
        joined = weight_cache.whole_of(wx, wh)
        assert joined is not None and torch.equal(joined, a.double()) and joined.is_contiguous(memory_format=CL)
        g = {"b": torch.randn(whole.shape, dtype=torch.float64, device=DEVICE),
             "x": torch.randn(wx.shape, dtype=torch.float64, device=DEVICE).contiguous(memory_format=CL),
             "h": torch.randn(wh.shape, dtype=torch.float64, device=DEVICE).contiguous(memory_format=CL)}
        used = [(t, g[k]) for t, k in ((whole, "b"), (wx, "x"), (wh, "h")) if k != drop]
        sum((t * gt).sum() for t, gt in used).backward()
        want_x = torch.zeros_like(g["x"]) if drop == "x" else g["x"]
        want_h = torch.zeros_like(g["h"]) if drop == "h" else g["h"]
        assert a.grad.dtype == torch.float32 and a.grad.is_contiguous()
        assert torch.equal(b.grad, g["b"].float())
        assert torch.equal(a.grad, torch.cat([want_x, want_h], 1).float())


@pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                    reason="the fused training layout needs the Triton kernels (CUDA, or the CPU interpreter)")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("n, B, copy_levers", [(12, 2, "0"), (9, 1, "1")])
def test_the_bf16_step_trains_the_same_with_it(n, B, copy_levers, monkeypatch):
    """The fused model's bf16 training step (small channel counts) with every level on the concatenated path: the
    loss and every gradient of the switch off, bit for bit; every level finds its whole weight in its halves'
    memory (no concatenation) in the forward and the backward. At n = 12 with the two copy levers off, and at n = 9
    (maps 9, 5, 3, 2) with a batch of one and them on (the default), which runs the same path through other ops
    (``convlstm_in_xh``, the attention writing into the decoder's concatenations)."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    for name in ("MSCRED_ENCODER_XH", "MSCRED_ATTENTION_CAT"):
        monkeypatch.setenv(name, copy_levers)
    run = fused_training_step(n, B, lambda: torch.autocast(DEVICE, dtype=torch.bfloat16), DEVICE,
                              channels=(4, 8, 8, 16))
    ref, ours, wholes = off_and_on(run, monkeypatch, "MSCRED_LSTM_WHOLE_WEIGHT", weight_cache, "whole_of")
    assert [w is not None for w in wholes] == [True] * 8  # four levels, forward and backward
    assert torch.equal(ours[0], ref[0])
    for k in ref[1]:
        assert torch.equal(ours[1][k], ref[1][k]), k


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the bf16 training step as the H200 runs it: CUDA")
def test_the_full_size_bf16_step_takes_it_on_cuda(monkeypatch):
    """n = 30, the default model, under bf16 autocast: levels 1-2 (level 1 on the CUDA step kernels, which read the
    whole weight as their packed and transposed forms) find their whole weight forward and backward; the same loss
    and gradients as with the switch off, up to the order of the bias gradients' atomic adds and cuDNN's choices."""
    monkeypatch.delenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", raising=False)
    run = fused_training_step(30, 4, lambda: torch.autocast("cuda", dtype=torch.bfloat16), "cuda")
    ref, ours, wholes = off_and_on(run, monkeypatch, "MSCRED_LSTM_WHOLE_WEIGHT", weight_cache, "whole_of")
    assert [w is not None for w in wholes] == [True] * 4
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=0)
    for k in ref[1]:
        torch.testing.assert_close(ours[1][k], ref[1][k], rtol=2e-2, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}")
