"""Zero padding that writes each element once.

``F.pad`` (``constant_pad_nd``) fills the whole output with zeros and then copies the input into its interior: the
interior is written twice. The fused paths pad the largest activations of a training step (the encoder's stride-2
inputs with TF's bottom/right padding, the small ConvLSTM levels' inputs), so here the border strips are zeroed and
the interior is written once, by the copy. The input's gradient is the interior view of the padded tensor's gradient,
handed back without a copy (``_PadCopy``).
"""
from __future__ import annotations

from typing import Optional

import torch


def zero_border(buf: torch.Tensor, pads: tuple[int, int, int, int]) -> None:
    """Zero the (top, bottom, left, right) border strips of ``buf`` (..., Hp, Wp) in place; the interior is left to
    the caller, which writes all of it (a fill of the whole buffer would write it twice)."""
    top, bottom, left, right = pads
    Hp, Wp = buf.shape[-2:]
    for strip in (buf[..., :top, :], buf[..., Hp - bottom:, :], buf[..., :, :left], buf[..., :, Wp - right:]):
        if strip.numel():
            strip.zero_()


def interior(t: torch.Tensor, pads) -> torch.Tensor:
    """The (..., H, W) interior view of a (..., H + top + bottom, W + left + right) zero-bordered tensor."""
    top, bottom, left, right = pads
    return t[..., top:t.shape[-2] - bottom, left:t.shape[-1] - right]


def pad_copy(x: torch.Tensor, pads: tuple[int, int, int, int]) -> torch.Tensor:
    """(N, C, H, W) -> (N, C, H + top + bottom, W + left + right) zero-bordered, in x's memory format
    (channels-last stays channels-last)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _PadCopy.apply(x, tuple(pads))
    return _padded(x, pads)


def _padded(x: torch.Tensor, pads: tuple[int, int, int, int]) -> torch.Tensor:
    top, bottom, left, right = pads
    N, C, H, W = x.shape
    fmt = torch.channels_last if (x.is_contiguous(memory_format=torch.channels_last)
                                  and not x.is_contiguous()) else torch.contiguous_format
    xp = torch.empty(N, C, H + top + bottom, W + left + right, device=x.device, dtype=x.dtype, memory_format=fmt)
    zero_border(xp, pads)
    copy_pixels(xp[:, :, top:top + H, left:left + W], x)
    return xp


def copy_pixels(dst: torch.Tensor, src: torch.Tensor, zeros: Optional[torch.Tensor] = None) -> None:
    """``dst.copy_(src)`` for (N, C, H, W) views, in 8-byte words where both hold each pixel's channels
    contiguously (channels-last): PyTorch copies into a strided view (the interior of a padded buffer, a crop) with
    its generic strided kernel, element by element -- 2-byte elements for bf16, ~1.2 TB/s on the H200 (49 us for
    level 1's (640, 32, 30, 30) of the training step, benchmarks/results/train_profile/). As 8-byte words the same
    copy has a quarter of the elements and index arithmetic. With MSCRED_PIXEL_COPY_KERNEL=1, CUDA tensors take a
    Triton kernel instead (``ops/triton/pixel_copy.py``: one index decode a pixel, 16-byte accesses). ``zeros``: a
    view to zero as well (``zero_pixels``), in the kernel's same pass where it is the channels right after ``dst``'s
    (``pixel_copy.zeros_fit``: levels 1-2's h_{-1} beside x_0)."""
    if dst.is_cuda:
        from mscred.ops.triton import pixel_copy  # (lazily: the Triton ops import this module)
        if (pixel_copy.enabled() and pixel_copy.suits(dst, src)
                and (zeros is None or pixel_copy.zeros_fit(dst, zeros))):
            pixel_copy.copy(dst, src, zeros)
            return
    if src.dtype == dst.dtype and src.element_size() < 8 and _words_fit(dst) and _words_fit(src):
        dst.permute(0, 2, 3, 1).view(torch.int64).copy_(src.permute(0, 2, 3, 1).view(torch.int64))
    else:
        dst.copy_(src)
    if zeros is not None:
        zero_pixels(zeros)


def zero_pixels(dst: torch.Tensor) -> None:
    """``dst.zero_()`` for an (N, C, H, W) view, in 8-byte words where it holds each pixel's channels contiguously
    (``copy_pixels``'s reason: a channel slice of a channels-last buffer is otherwise filled element by element)."""
    if dst.element_size() < 8 and _words_fit(dst):
        dst.permute(0, 2, 3, 1).view(torch.int64).zero_()
    else:
        dst.zero_()


def _words_fit(t: torch.Tensor) -> bool:
    """Whether ``t`` (N, C, H, W) can be read as 8-byte words along its channels: channels contiguous, and every
    stride and the offset whole words."""
    per_word = 8 // t.element_size()
    return (t.dim() == 4 and t.stride(1) == 1 and t.shape[1] % per_word == 0
            and t.storage_offset() % per_word == 0 and all(s % per_word == 0 for s in (t.stride(0), t.stride(2),
                                                                                      t.stride(3))))


class _PadCopy(torch.autograd.Function):
    """``_padded`` with its gradient as the interior view of the padded gradient. Autograd's own backward of the
    slice assignment (CopySlices) copied the whole padded gradient and then cloned the interior into NCHW order,
    which the encoder then added to the channels-last gradient of the same activation from the ConvLSTM with
    PyTorch's strided (non-vectorized) kernels (benchmarks/results/step_ops/). The view costs nothing; the add that
    sums the two gradients reads it in place. The graphed bf16 training step on the H200: 4.17-4.22 -> 4.04-4.07 ms
    (benchmarks/results/train_profile/)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, pads: tuple[int, int, int, int]) -> torch.Tensor:
        ctx.pads = pads
        return _padded(x, pads)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        top, bottom, left, right = ctx.pads
        H, W = grad.shape[-2] - top - bottom, grad.shape[-1] - left - right
        return grad[:, :, top:top + H, left:left + W], None
