"""Zero padding that writes each element once.

``F.pad`` (``constant_pad_nd``) fills the whole output with zeros and then copies the input into its interior: the
interior is written twice. The fused paths pad the largest activations of a training step (the encoder's stride-2
inputs with TF's bottom/right padding, the small ConvLSTM levels' inputs), so here the border strips are zeroed and
the interior is written once, by the copy. Autograd sees a slice assignment: the input's gradient is the interior
view of the padded tensor's gradient (no copy).
"""
from __future__ import annotations

import torch


def zero_border(buf: torch.Tensor, pads: tuple[int, int, int, int]) -> None:
    """Zero the (top, bottom, left, right) border strips of ``buf`` (..., Hp, Wp) in place; the interior is left to
    the caller, which writes all of it (a fill of the whole buffer would write it twice)."""
    top, bottom, left, right = pads
    Hp, Wp = buf.shape[-2:]
    for strip in (buf[..., :top, :], buf[..., Hp - bottom:, :], buf[..., :, :left], buf[..., :, Wp - right:]):
        if strip.numel():
            strip.zero_()


def pad_copy(x: torch.Tensor, pads: tuple[int, int, int, int]) -> torch.Tensor:
    """(N, C, H, W) -> (N, C, H + top + bottom, W + left + right) zero-bordered, in x's memory format
    (channels-last stays channels-last)."""
    top, bottom, left, right = pads
    N, C, H, W = x.shape
    fmt = torch.channels_last if (x.is_contiguous(memory_format=torch.channels_last)
                                  and not x.is_contiguous()) else torch.contiguous_format
    xp = torch.empty(N, C, H + top + bottom, W + left + right, device=x.device, dtype=x.dtype, memory_format=fmt)
    zero_border(xp, pads)
    xp[:, :, top:top + H, left:left + W] = x
    return xp
