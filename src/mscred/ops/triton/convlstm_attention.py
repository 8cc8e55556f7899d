"""One level's training ConvLSTM and its temporal attention as one op, so that the attention's backward folds into
the ConvLSTM's.

In training every h_t of a level feeds only the level's attention, whose backward writes dL/dh_t for all T steps
and the ConvLSTM's backward reads them back. All but the last are a_t g + ds_t h_{T-1} (``attention_last``), so
this op's backward runs the attention's backward for the last step and the coefficients only, and hands the
ConvLSTM's backward the attention's two maps (g, h_{T-1}) instead of T - 1 more: level 1's backward step kernel
(``ops/conv_cell/conv_cell_bwd.cu``) makes each step's map where it reads it. Elsewhere the maps are made where
they are read (``attention_last.FoldedGrad``), the same values.

``folds`` says where the model takes it: MSCRED_LSTM_ATTN_FOLD=0 never, =1 wherever the fused ops run (the CPU
interpreter's tests), unset where level 1's step kernels run (Hopper, bf16, 32 channels, 2 x 2; not with
MSCRED_LSTM_CONV_CELL_BWD=0).
"""
from __future__ import annotations

from typing import Optional

import torch

from mscred.ops import conv_cell, weight_cache, wgrad_stream
from mscred.ops.triton import attention, attention_last
from mscred.ops.triton import convlstm as lstm
from mscred.ops.triton.runtime import runs_fused, switched_off, switched_on


def folds(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the level of input x (B, T, C, H, W, as autocast will cast it) and gate weight (4Ch, C + Ch, k, k)
    trains through ``train_with_attention``'s one op (module docstring)."""
    if switched_off("MSCRED_LSTM_ATTN_FOLD") or not runs_fused(x) or lstm.buffer_layout() != "nhwc":
        return False  # (the attention's folded backward reads channels-last hidden states)
    if switched_on("MSCRED_LSTM_ATTN_FOLD"):
        return True
    if not x.is_cuda or torch.cuda.get_device_capability(x.device) != (9, 0):
        return False
    if switched_off("MSCRED_LSTM_CONV_CELL_BWD"):  # the split backward would make every step's map in PyTorch ops
        return False
    dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else x.dtype
    C, Ch, k = x.shape[2], weight.shape[0] // 4, weight.shape[-1]
    return conv_cell.takes(dtype, lstm._compute_types(dtype)[1], C, Ch, (k, k), lstm._padding(k))


def train_with_attention(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
                         padded: bool = False, cat: bool = False) -> torch.Tensor:
    """``attention.temporal_attention(lstm.train(x, weight, bias, forget_bias, padded), cat)`` as one op: the
    attention output (B, Ch, H, W) (channels-last; with ``cat`` the upper half of a (B, 2Ch, H, W) buffer,
    ``ops.attention_cat``), the ConvLSTM's hidden states kept for the backward only."""
    xp, w_x, w_h, bias, layout = lstm.train_operands(x, weight, bias, padded)
    with torch.autocast(xp.device.type, enabled=False):
        return convlstm_attention_train(xp, w_x, w_h, bias, float(forget_bias), layout, cat)[0]


@torch.library.custom_op("mscred::convlstm_attention_train", mutates_args=())
def convlstm_attention_train(xp: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor,
                             forget_bias: float, layout: str, cat: bool
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor], torch.Tensor,
                                        torch.Tensor]:
    """(the attention output and its partials, then ``convlstm.convlstm_train``'s outputs: every h_t, the gates, the
    cells, the recurrent inputs) of one level; arguments as ``convlstm_train``'s, ``cat`` as
    ``attention.temporal_attention``'s."""
    out, pre, cells, hprev = lstm.train_forward(xp, w_x, w_h, bias, forget_bias, layout)
    attended, part = attention.temporal_attention_fused(out, cat)
    return attended, part, out, pre, cells, hprev


@convlstm_attention_train.register_fake
def _(xp, w_x, w_h, bias, forget_bias, layout, cat):
    out, pre, cells, hprev = lstm.train_like(xp, w_h, layout)
    return attention.output_like(out, cat), attention.partials_like(out), out, pre, cells, hprev


@torch.library.custom_op("mscred::temporal_attention_last_grad", mutates_args=())
def temporal_attention_last_grad(g: torch.Tensor, h: torch.Tensor,
                                 saved: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(dL/dh_{T-1}, coef) of the attention of h (B, T, C, H, W) stored channels-last, given g: its output's gradient
    in h's dtype, stored channels-last (``attention_last.last_step_grad``; ``saved`` the forward's partials)."""
    _, dlast, coef = attention_last.last_step_grad(g, h, saved)
    return dlast, coef


@temporal_attention_last_grad.register_fake
def _(g, h, saved=None):
    B, T, C, H, W = h.shape
    coef_dtype = torch.float64 if h.dtype == torch.float64 else torch.float32
    return h.new_empty(B, H, W, C).permute(0, 3, 1, 2), h.new_empty(B, T, 2, dtype=coef_dtype)


def _setup_context(ctx, inputs, output) -> None:
    _, part, out, pre, cells, hprev = output
    ctx.mark_non_differentiable(part, out, *pre, cells, hprev)  # (for the backward only: convlstm._setup_context)
    save(ctx, inputs[:6], part, out, pre, cells, hprev)


def save(ctx, inputs, part, out, pre, cells, hprev) -> None:
    """What ``_backward`` reads, in ``ctx`` (as ``convlstm.save``, with the attention's partials and every h_t)."""
    xp, w_x, w_h, bias, forget_bias, layout = inputs
    ctx.save_for_backward(xp, w_x, w_h, bias, cells, hprev, out, part, *pre)
    ctx.set_materialize_grads(False)
    ctx.forget_bias, ctx.layout = forget_bias, layout
    ctx.side_wgrad = weight_cache.made_here(w_x, w_h)


def _backward(ctx, g, _dpart, _dout, _dpre, _dcells, _dhprev):
    if g is None:
        return None, None, None, None, None, None, None
    xp, w_x, w_h, bias, cells, hprev, out, part, *pre = ctx.saved_tensors
    g = attention._channels_last_copy(g.to(out.dtype))
    dlast, coef = temporal_attention_last_grad(g, out, part)
    with wgrad_stream.allowed(ctx.side_wgrad):
        dxp, dw_x, dw_h, dbias = lstm.convlstm_train_backward(dlast, xp, w_x, w_h, bias, pre, cells, hprev,
                                                              ctx.forget_bias, ctx.layout, attn_g=g,
                                                              attn_hl=out[:, -1], attn_coef=coef)
    return dxp, dw_x, dw_h, dbias, None, None, None


convlstm_attention_train.register_autograd(_backward, setup_context=_setup_context)
