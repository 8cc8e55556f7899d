"""Each level's ConvLSTM right after the convolution that makes its input (``model.interleaved_levels``,
MSCRED_INTERLEAVED_LEVELS=1): the same ops on the same values, so the loss and every gradient are the encoder-first
order's bit for bit; what changes is the backward's order, which autograd sets by creation (latest first): each
encoder convolution's backward right after its level's ConvLSTM backward, instead of the whole encoder's after
level 1's. The kernels run under the Triton interpreter on the CPU (conftest); the bf16 model at full size on CUDA."""
from __future__ import annotations

import contextlib

import pytest
import torch
from model_runs import assert_same_step, fused_training_step, off_and_on

from mscred import model
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                reason="the fused training layout needs the Triton kernels (CUDA, or the CPU "
                                       "interpreter)")


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_INTERLEAVED_LEVELS", setting)
    assert model.interleaved_levels(torch.empty(0)) is on


def _backward_order(run) -> list[str]:
    """The backward's ConvLSTM ("lstm") and convolution ("conv") nodes in the order autograd evaluated them, read
    from the profiler's records of one ``run()``."""
    run()  # warm (the interpreter's first launches)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    prefix = "autograd::engine::evaluate_function: "
    order = []
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        if event.name.startswith(prefix):
            node = event.name[len(prefix):]
            if "convlstm" in node or "InXh" in node:
                order.append("lstm")
            elif node.startswith("ConvolutionBackward"):
                order.append("conv")
    return order


def test_each_convolutions_backward_follows_its_levels_convlstm(monkeypatch):
    """Encoder first: the four ConvLSTM backwards one after another, then the four encoder convolutions'. Interleaved:
    each ConvLSTM's backward followed by its convolution's. (The decoder's four convolutions come first in both.)"""
    run = fused_training_step(12, 2, contextlib.nullcontext, DEVICE)
    monkeypatch.setenv("MSCRED_INTERLEAVED_LEVELS", "0")
    assert _backward_order(run) == ["conv"] * 4 + ["lstm"] * 4 + ["conv"] * 4
    monkeypatch.setenv("MSCRED_INTERLEAVED_LEVELS", "1")
    assert _backward_order(run) == ["conv"] * 4 + ["lstm", "conv"] * 4


@pytest.mark.parametrize("n, B, concat", [(12, 2, "0"), (9, 1, "225")])
def test_the_fused_model_trains_the_same_with_it(n, B, concat, monkeypatch, strict_float32):
    """float32: every level on the concatenated path with the copy levers' [x, h] buffers (n = 12), and odd maps
    with a batch of one on the default paths (n = 9): the loss and every gradient bit for bit."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", concat)
    ref, ours, _ = off_and_on(fused_training_step(n, B, torch.enable_grad, DEVICE), monkeypatch,
                              "MSCRED_INTERLEAVED_LEVELS")
    assert_same_step(ours, ref)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_bf16_step_trains_the_same_with_it(monkeypatch):
    """bf16 under autocast, as the training step runs (the weight cache, the [x, h] epilogues): on the CPU at small
    channel counts, every level on the concatenated path; on CUDA the default model at n = 30 (level 1 on the CUDA
    step kernels). The loss and every gradient the same (``assert_same_step``)."""
    if DEVICE == "cpu":
        monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    n, B, channels = (30, 4, None) if DEVICE == "cuda" else (12, 2, (4, 8, 8, 16))
    run = fused_training_step(n, B, lambda: torch.autocast(DEVICE, dtype=torch.bfloat16), DEVICE, channels=channels)
    ref, ours, _ = off_and_on(run, monkeypatch, "MSCRED_INTERLEAVED_LEVELS")
    assert_same_step(ours, ref, bf16=True)
