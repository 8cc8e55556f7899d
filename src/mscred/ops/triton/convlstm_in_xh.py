"""A large level's training ConvLSTM in the [x, h] buffer that the training encoder filled (``ops.encoder_xh``).

``convlstm.convlstm_train`` and ``convlstm_attention.convlstm_attention_train`` allocate the level's xh (T, B,
C + Ch, Hp, Wp) and copy x into it first (``convlstm_concat.forward``). Here the encoder's epilogue has already
written every x_t there and zeroed h_{-1}, so the op is handed xh and fills the rest of it (the h half): an op that
mutates its input. torch's ``register_autograd`` does not take such ops, so the two ops below are wrapped in an
``autograd.Function`` (``_InXh``) whose backward is the functional ops' own (``convlstm._backward``,
``convlstm_attention._backward``) on the same saved tensors: the same kernels on the same values, one copy fewer.
"""
from __future__ import annotations

import torch

from mscred.ops import encoder_xh
from mscred.ops.triton import attention, convlstm_attention, convlstm_concat
from mscred.ops.triton import convlstm as lstm


def train(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
          with_attention: bool, cat: bool = False) -> torch.Tensor:
    """``convlstm.train(x, weight, bias, forget_bias, padded=True)``, or with ``with_attention``
    ``convlstm_attention.train_with_attention(x, weight, bias, forget_bias, True, cat)``, for a level input x that
    the encoder wrote into an [x, h] buffer: that buffer is filled in place. An x that is not laid out as one (cast
    into a copy on its way, say), or a level that does not take the concatenated path, runs those functions' op."""
    xp, w_x, w_h, bias, layout = lstm.train_operands(x, weight, bias, True)
    with torch.autocast(xp.device.type, enabled=False):
        if takes(xp, w_h, layout):
            return _InXh.apply(xp, w_x, w_h, bias, float(forget_bias), layout, with_attention, cat)
        if with_attention:
            return convlstm_attention.convlstm_attention_train(xp, w_x, w_h, bias, float(forget_bias), layout, cat)[0]
        return lstm.convlstm_train(xp, w_x, w_h, bias, float(forget_bias), layout)[0]


def takes(xp: torch.Tensor, w_h: torch.Tensor, layout: str) -> bool:
    """Whether the training op's input ``xp`` (B, T, C, Hp, Wp) is the x half of an [x, h] buffer and its level
    takes the concatenated path (``convlstm_concat.runs``), i.e. whether ``_InXh`` runs it."""
    _, _, _, Ch, H, W, _ = lstm._unpadded(xp, w_h)
    return convlstm_concat.runs(True, layout, H, W) and encoder_xh.recover(xp, Ch) is not None


class _InXh(torch.autograd.Function):
    """(xp, w_x, w_h, bias, forget_bias, layout, with_attention, cat) -> every h_t (B, T, Ch, H, W), or the
    attention output (B, Ch, H, W) with ``with_attention`` (``cat``: as ``attention.temporal_attention``'s); xp the
    x half of its [x, h] buffer, whose h half the forward fills. The gradients of xp, w_x, w_h and bias as the
    functional ops give them."""

    @staticmethod
    def forward(ctx, xp, w_x, w_h, bias, forget_bias, layout, with_attention, cat):
        xh = encoder_xh.recover(xp, w_h.shape[0] // 4)
        # xp is saved detached: the view it is (of the encoder's output) would be regenerated from its base when
        # unpacked, which autograd refuses after the in-place write to that base here; the backward reads only its
        # shape, dtype and device
        inputs = (xp.detach(), w_x, w_h, bias, forget_bias, layout)
        ctx.with_attention = with_attention
        if with_attention:
            attended, part, out, pre, cells = convlstm_attention_train_in_xh(xh, w_x, w_h, bias, forget_bias, cat)
            convlstm_attention.save(ctx, inputs, part, out, pre, cells, xh)
            return attended
        out, pre, cells = convlstm_train_in_xh(xh, w_x, w_h, bias, forget_bias)
        lstm.save(ctx, inputs, pre, cells, xh)
        return out

    @staticmethod
    def backward(ctx, grad):
        if ctx.with_attention:
            grads = convlstm_attention._backward(ctx, grad, None, None, None, None, None)
        else:
            grads = lstm._backward(ctx, grad, None, None, None)
        return (*grads[:4], None, None, None, None)


def _forward(xh: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor, forget_bias: float):
    """(out, gates, cells) of the concatenated path, xh's x half and h_{-1} given
    (``convlstm_concat.forward_filled``)."""
    out, cells, _, pads = _outputs(xh, w_h)
    cdt = lstm._compute_types(xh.dtype)[0]
    return out, convlstm_concat.forward_filled(xh, w_x, w_h, bias, out, cells, pads, forget_bias, cdt), cells


def _like(xh: torch.Tensor, w_h: torch.Tensor):
    """``_forward``'s outputs, empty (the ops' fakes)."""
    out, cells, (T, B, Ch, H, W), _ = _outputs(xh, w_h)
    return out, convlstm_concat.gates_like(B, T, Ch, H, W, xh), cells


def _outputs(xh: torch.Tensor, w_h: torch.Tensor):
    """(out, cells) unfilled, (T, B, Ch, H, W) and the padding of the level whose [x, h] buffer is xh."""
    T, B, _, HP, WP = xh.shape
    pads = lstm._padding(w_h.shape[-1])
    Ch, H, W = w_h.shape[0] // 4, HP - pads[0] - pads[1], WP - pads[2] - pads[3]
    out, cells = convlstm_concat.outputs(B, T, Ch, H, W, xh, lstm._compute_types(xh.dtype)[1])
    return out, cells, (T, B, Ch, H, W), pads


@torch.library.custom_op("mscred::convlstm_train_in_xh", mutates_args=("xh",))
def convlstm_train_in_xh(xh: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor,
                         forget_bias: float) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """``convlstm_train``'s (out, pre, cells) on the concatenated path, given its xh (T, B, C + Ch, Hp, Wp) with
    every x_t and h_{-1} = 0 in place; the op writes h_0 .. h_{T-2} into it (it is the functional op's hprev)."""
    return _forward(xh, w_x, w_h, bias, forget_bias)


@convlstm_train_in_xh.register_fake
def _(xh, w_x, w_h, bias, forget_bias):
    return _like(xh, w_h)


@torch.library.custom_op("mscred::convlstm_attention_train_in_xh", mutates_args=("xh",))
def convlstm_attention_train_in_xh(xh: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor,
                                   forget_bias: float, cat: bool
                                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor],
                                              torch.Tensor]:
    """``convlstm_attention_train``'s (attention output, its partials, out, pre, cells), xh given as in
    ``convlstm_train_in_xh``, ``cat`` as ``attention.temporal_attention``'s."""
    out, pre, cells = _forward(xh, w_x, w_h, bias, forget_bias)
    attended, part = attention.temporal_attention_fused(out, cat)
    return attended, part, out, pre, cells


@convlstm_attention_train_in_xh.register_fake
def _(xh, w_x, w_h, bias, forget_bias, cat):
    out, pre, cells = _like(xh, w_h)
    return attention.output_like(out, cat), attention.partials_like(out), out, pre, cells
