"""The decoder's skip concatenation written by its two producers: no copy of either half.

In training, each of levels 1-3 ends in ``cat([deconv_l(d), attention(h_l)], channels)``: the deconvolution's bias
+ SELU epilogue (``bias_act``) and the temporal attention each wrote their own tensor, and the concatenation copied
both into a third (``ops/concat.py``, in 8-byte words): six copies, ~22 us of the graphed bf16 step on the H200
(benchmarks/results/pack_split2/train_step_profile.txt, ``aten::copy_`` of (128, 8, 8, 32), (128, 15, 15, 16) and
(128, 30, 30, 8) words). Here one autograd function allocates the concatenation and runs both forward kernels into
its channel halves (the epilogue's into the lower, the attention's sliced output into the upper, as scoring's
``Decoder.forward_into`` does without autograd); its backward hands each half of the gradient to that producer's
backward kernel -- what ``torch.cat``'s backward (two views) and the two ops' own backward formulas did, so the
step's values and gradients are bit for bit the same. The level's attention therefore runs at the decoder, from
the ConvLSTM's hidden states (``AttnConvLSTM.forward(..., attend=False)``).

Opt-in (``MSCRED_SKIP_EPILOGUE=1``): on the H200 it measured no gain on the graphed bf16 step -- 3.206 / 3.221 ms
with it against 3.193 ms without, in alternation in one run (benchmarks/results/final_1201d/; the differences are
within the run's noise). Not profiled; a guess is that the two kernels' strided stores into the channel halves
(pixel stride 2C) cost what the copies did.
"""
from __future__ import annotations

import torch

from mscred.ops.concat import cat_channels
from mscred.ops.triton import attention, bias_act
from mscred.ops.triton.runtime import runs_fused, switched_on


def enabled() -> bool:
    """Whether the training decoder takes the levels' hidden states and writes each concatenation at once
    (MSCRED_SKIP_EPILOGUE=1; off by default)."""
    return switched_on("MSCRED_SKIP_EPILOGUE")


def deconv_beside_attention(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int, size: int,
                            h: torch.Tensor) -> torch.Tensor:
    """``cat([bias_act(y, bias, selu, top, top, size, size), temporal_attention(h)], dim=1)``: y (B, O, Hy, Wy)
    the transposed convolution's full output, h (B, T, C, size, size) the level's hidden states; (B, O + C, size,
    size), channels-last where both are."""
    if not (runs_fused(y) and y.dtype == h.dtype and y.dtype != torch.float64 and _channels_last(y)
            and attention._channels_last(h)):
        return cat_channels(bias_act.bias_act(y, bias, selu, top, top, size, size), attention.temporal_attention(h))
    return _DeconvBesideAttention.apply(y, bias.contiguous(), h, bool(selu), int(top), int(size))


def _channels_last(t: torch.Tensor) -> bool:
    return t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


class _DeconvBesideAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, bias, h, selu: bool, top: int, size: int):
        B, O = y.shape[:2]
        out = torch.empty(B, O + h.shape[2], size, size, device=y.device, dtype=y.dtype,
                          memory_format=torch.channels_last)
        bias_act.bias_act_into(y, bias, selu, top, top, out[:, :O])
        attention.temporal_attention_into(h, out[:, O:])
        ctx.save_for_backward(out, bias, h)
        ctx.selu, ctx.top, ctx.y_size = selu, top, tuple(y.shape[2:])
        return out

    @staticmethod
    def backward(ctx, grad):
        out, bias, h = ctx.saved_tensors
        O = out.shape[1] - h.shape[2]
        dy = dbias = dh = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            dy, dbias = bias_act.bias_act_fused_backward(grad[:, :O], out[:, :O], bias, ctx.selu, ctx.top, ctx.top,
                                                         *ctx.y_size, True)
        if ctx.needs_input_grad[2]:
            dh = attention.temporal_attention_fused_backward(grad[:, O:], h)
        return dy, dbias, dh, None, None, None
