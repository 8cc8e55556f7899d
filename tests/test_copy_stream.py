"""Copies on a side CUDA stream (``mscred.ops.copy_stream``) land where one stream's copies land.

CPU: the switch (on by default, MSCRED_COPY_STREAM=0 off) is CUDA-only, and ``Aside`` then copies in place.
CUDA: the fused bf16 model's loss and every gradient with the switch on equal the switch off's (the same kernels on
the same data; the tolerance covers atomic-order differences, as in test_wgrad_stream.py), the side stream really
takes the concatenated levels' copies, and a whole training step captured in a CUDA graph with the switch on
replays to the eager step's losses.
"""
from __future__ import annotations

import pytest
import torch

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import copy_stream
from mscred.ops.triton import convlstm as fused_convlstm
from test_level_streams import eager_and_graphed_losses
from test_wgrad_stream import _bf16_step

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA or not fused_convlstm.is_available()[0],
                                reason="the side stream is a CUDA feature (needs a GPU and Triton)")


def test_switch_is_cuda_only(monkeypatch):
    monkeypatch.delenv("MSCRED_COPY_STREAM", raising=False)
    assert not copy_stream.switched(torch.zeros(1))  # a CPU tensor never goes to a stream
    monkeypatch.setenv("MSCRED_COPY_STREAM", "1")
    assert not copy_stream.switched(torch.zeros(1))


def test_aside_copies_in_place_off_cuda():
    dst = torch.zeros(2, 4, 3, 3).to(memory_format=torch.channels_last)
    src = torch.randn(2, 4, 3, 3)
    aside = copy_stream.Aside(dst)
    assert aside.side is None
    aside.copy(dst[:, :2], src[:, :2])
    aside.copy(dst[:, 2:], src[:, 2:], fn=lambda d, s: d.copy_(2 * s))
    assert not aside.pending
    aside.join()  # nothing queued: no-op
    torch.testing.assert_close(dst, torch.cat([src[:, :2], 2 * src[:, 2:]], dim=1))


@needs_cuda
def test_switch_is_on_by_default_on_cuda(monkeypatch):
    monkeypatch.delenv("MSCRED_COPY_STREAM", raising=False)
    assert copy_stream.switched(torch.zeros(1, device="cuda"))
    monkeypatch.setenv("MSCRED_COPY_STREAM", "0")
    assert not copy_stream.switched(torch.zeros(1, device="cuda"))


@needs_cuda
def test_aside_copy_is_joined_before_the_reader():
    src = torch.randn(64, 32, 31, 31, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    dst = torch.empty(64, 48, 31, 31, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    torch.cuda._sleep(5_000_000)  # a long kernel on the current stream first: the side copy must wait for it
    aside = copy_stream.Aside(dst)
    aside.copy(dst[:, :32], src)
    assert aside.pending
    aside.join()
    torch.testing.assert_close(dst[:, :32], src, rtol=0, atol=0)


@needs_cuda
@pytest.mark.parametrize("batch", [3, 32])
def test_side_copies_match_one_stream(monkeypatch, batch):
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda().train()
    x = torch.rand(batch, 5, 3, 30, 30, device="cuda")
    monkeypatch.setenv("MSCRED_COPY_STREAM", "0")
    ref = _bf16_step(net, x)
    monkeypatch.setenv("MSCRED_COPY_STREAM", "1")
    copies = []
    real_copy = copy_stream.Aside.copy
    monkeypatch.setattr(copy_stream.Aside, "copy",
                        lambda self, *a, **k: copies.append(self.side is not None) or real_copy(self, *a, **k))
    for _ in range(2):  # twice: the second run reuses memory the first freed across streams
        copies.clear()
        ours = _bf16_step(net, x)
        # levels 1-2 (concatenated): their forward's copy, and level 2's backward copies of dx_4 .. dx_0
        assert sum(copies) >= 2 + 5, copies
        torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=0)
        for k in ref[1]:  # (test_wgrad_stream.py: kernels that sum with atomics round in their arrival order)
            scale = ref[1][k].abs().max().item() + 1e-12
            torch.testing.assert_close(ours[1][k], ref[1][k], rtol=2 ** -6, atol=2e-3 * scale,
                                       msg=lambda m, k=k: f"{k}: {m}")


@needs_cuda
def test_graphed_step_with_side_copies_replays_the_eager_losses(monkeypatch):
    monkeypatch.setenv("MSCRED_COPY_STREAM", "1")
    losses = eager_and_graphed_losses(bf16=True)
    torch.testing.assert_close(losses["graph"], losses["eager"], rtol=2e-3, atol=0)
