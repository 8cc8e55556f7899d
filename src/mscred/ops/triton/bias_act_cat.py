"""The decoder's bias + SELU written straight into its skip concatenation: ``cat([act(crop(y) + b), skip], dim=1)``
with the first half never copied.

In the fused training step each decoder level ran ``bias_act`` into a tensor of its own and then ``cat_channels``
copied that tensor and the attention output below it into the concatenation buffer: two copy kernels a level, six
on the chain (2.1 + 3.2, 2.8 + 4.2, 4.2 + 5.1 us at levels 3, 2, 1 in ``results/graph_timeline_fold/``). Here the
bias + SELU kernel (``bias_act._forward_into``, which takes any output strides) writes into the buffer's lower
channel half and only the skip is copied (``padding.copy_pixels``, 8-byte words): one copy a level fewer. The
backward is ``bias_act``'s on the lower half of the gradient, with the buffer's lower half as SELU's output; the
skip's gradient is the upper half, a view, as ``torch.cat``'s backward gives it.

On by default since 2026-12-04 (late): the graphed bf16 training step on the H200 took 2.417 / 2.415 / 2.416 ms
with it against 2.424 / 2.425 / 2.423 ms without, in alternation in one run (``benchmarks/results/decoder_cat/``,
``bash benchmarks/gpu_decoder_cat.sh``); ``MSCRED_DECODER_CAT_EPILOGUE=0`` turns it off (A/B runs). Elsewhere
(float64, no Triton, other layouts or dtypes) it is ``bias_act`` then ``cat_channels``, the same numbers. y may be
in either layout (cuDNN gives channels-last on CUDA, PyTorch NCHW on the CPU); the concatenation is channels-last.
"""
from __future__ import annotations

import torch

from mscred.ops import attention_cat
from mscred.ops.concat import cat_channels
from mscred.ops.padding import copy_pixels
from mscred.ops.triton import bias_act as _bias_act
from mscred.ops.triton.runtime import runs_fused, switched_off


def enabled() -> bool:
    """Whether the decoder writes its bias + SELU into the concatenation (default; MSCRED_DECODER_CAT_EPILOGUE=0
    turns it off)."""
    return not switched_off("MSCRED_DECODER_CAT_EPILOGUE")


def bias_act_cat(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int, left: int, height: int, width: int,
                 skip: torch.Tensor, skip_in_cat: bool = False) -> torch.Tensor:
    """``cat_channels(bias_act(y, bias, selu, top, left, height, width), skip)``: (B, C + Cs, height, width),
    channels-last where the kernel runs. ``skip_in_cat``: skip is the upper half of a concatenation buffer whose
    lower half is this call's to write (``ops.attention_cat``): the result goes there, nothing is copied, and the
    buffer is returned."""
    _bias_act._check_crop(y.shape, top, left, height, width)
    fits = (runs_fused(y) and y.dtype != torch.float64 and skip.dtype == y.dtype and skip.device == y.device
            and skip.dim() == 4 and skip.shape[0] == y.shape[0] and tuple(skip.shape[2:]) == (height, width))
    if not fits:
        return cat_channels(_bias_act.bias_act(y, bias, selu, top, left, height, width), skip)
    into = skip_in_cat and attention_cat.recover(skip, y.shape[1]) is not None
    return (_BiasActIntoCat if into else _BiasActCat).apply(y, bias.contiguous(), skip, bool(selu), int(top),
                                                            int(left), int(height), int(width))


class _BiasActCat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, bias, skip, selu, top, left, height, width):
        C = y.shape[1]
        out = torch.empty(y.shape[0], C + skip.shape[1], height, width, device=y.device, dtype=y.dtype,
                          memory_format=torch.channels_last)
        _fill_lower_half(ctx, out, y, bias, selu, top, left)
        copy_pixels(out[:, C:], skip)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, bias = ctx.saved_tensors
        C, y_shape, channels_last, selu, top, left = ctx.meta
        dy, db = _bias_act.bias_act_fused_backward(grad[:, :C], out[:, :C], bias, selu, top, left, y_shape[2],
                                                   y_shape[3], channels_last)  # dy in y's layout, as bias_act's
        return dy, db, grad[:, C:], None, None, None, None, None


class _BiasActIntoCat(_BiasActCat):
    """``_BiasActCat`` for a skip that is the upper half of its concatenation buffer already (``bias_act_cat``'s
    ``skip_in_cat``): the buffer, a view of skip's storage, is returned with its lower half written. Backward, the
    same kernel copies the gradient's upper half out compact as it reads the lower: the skip's gradient as the
    attention's backward reads it, which would otherwise copy it itself (``attention._channels_last_copy``)."""

    @staticmethod
    def forward(ctx, y, bias, skip, selu, top, left, height, width):
        return _fill_lower_half(ctx, attention_cat.recover(skip, y.shape[1]), y, bias, selu, top, left)

    @staticmethod
    def backward(ctx, grad):
        out, bias = ctx.saved_tensors
        C, y_shape, channels_last, selu, top, left = ctx.meta
        dy, db, dskip = _bias_act.bias_act_fused_backward_cat(grad, out[:, :C], bias, selu, top, left, y_shape[2],
                                                              y_shape[3], channels_last)
        return dy, db, dskip, None, None, None, None, None


def _fill_lower_half(ctx, out: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int,
                     left: int) -> torch.Tensor:
    """The concatenation ``out``'s lower channel half written with bias + act of y's (top, left) window, and what
    the backward needs saved; returns out."""
    C = y.shape[1]
    _bias_act._forward_into(y, bias, selu, top, left, out[:, :C])
    ctx.save_for_backward(out, bias)  # the lower half: SELU's output, whose derivative the backward reads
    ctx.meta = (C, tuple(y.shape), _bias_act._channels_last(y), selu, top, left)
    return out
