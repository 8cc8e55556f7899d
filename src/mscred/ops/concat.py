"""The decoder's skip concatenation along channels, for channels-last tensors, in 8-byte words.

``torch.cat`` along the channels of two channels-last tensors interleaves them pixel by pixel, and PyTorch's
batched-copy kernel does that with 2-byte elements for bf16: level 1's (128, 64, 30, 30) took 19.0 us of the
training step, the three concatenations 37 us (H200, benchmarks/results/train_layout/train_step_profile.txt).
Here each input is copied into its channel half with ``padding.copy_pixels`` (8-byte words); the gradient is the
two channel halves of the output's gradient, views, as ``torch.cat``'s own backward gives them.
"""
from __future__ import annotations

import torch

from mscred.ops.padding import copy_pixels


def cat_channels(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.cat([a, b], dim=1)`` for (N, C, H, W) tensors; channels-last inputs of one dtype give a
    channels-last output written in words, anything else goes to ``torch.cat``."""
    if not (_pixels_contiguous(a) and _pixels_contiguous(b) and a.dtype == b.dtype and a.device == b.device
            and a.shape[0] == b.shape[0] and a.shape[2:] == b.shape[2:]):
        return torch.cat([a, b], dim=1)
    return _CatChannels.apply(a, b)


def _pixels_contiguous(t: torch.Tensor) -> bool:
    """Whether (N, C, H, W) ``t`` keeps each pixel's channels contiguous (channels-last, or a channel slice of it)."""
    return t.dim() == 4 and t.stride(1) == 1


class _CatChannels(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.split = a.shape[1]
        out = torch.empty(a.shape[0], a.shape[1] + b.shape[1], *a.shape[2:], device=a.device, dtype=a.dtype,
                          memory_format=torch.channels_last)
        copy_pixels(out[:, :ctx.split], a)
        copy_pixels(out[:, ctx.split:], b)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad[:, :ctx.split], grad[:, ctx.split:]
