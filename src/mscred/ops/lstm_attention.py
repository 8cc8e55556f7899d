"""One ConvLSTM level and its temporal attention in one kernel, for bf16 inference: ``resident_attention``.

Where the window-resident kernel (``ops.resident_lstm``) runs a level (levels 1-2 of bf16 scoring), the window's
temporal attention is finished on the SM too: after a window's last step the block computes the scores <h_t, h_T>
/ T, their softmax over the steps and the weighted sum, and writes only that map. Apart, the kernel wrote all T
hidden maps to HBM and the attention kernel read them twice (the scores need all of h_T before any output element
is known); here h_T and h_{T-1} are still in the block's shared memory, and h_1 .. h_{T-2} go through a scratch slot
that each block reuses window after window, so they stay in L2. The arithmetic is the attention kernel's (float32
scores and sums of the bf16 maps, scores divided by T), in another summation order.

``MSCRED_RESIDENT_ATTENTION=0`` keeps the two kernels (A/B runs); ``MSCRED_RESIDENT_LSTM=0`` turns off both.
"""
from __future__ import annotations

import torch

from mscred.ops import resident_lstm
from mscred.ops.convlstm_sliding import sliding
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton.runtime import switched_off


def resident_attention(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
                       out: torch.Tensor | None = None) -> torch.Tensor | None:
    """``temporal_attention(convlstm(x, weight, bias, forget_bias))`` of one level in one kernel, where it runs.

    Parameters
    ----------
    x : (B, T, C, H, W) tensor, the level's input (sliding windows share their input convolutions, as in the fused
        ConvLSTM op)
    weight, bias, forget_bias : the level's ConvLSTM parameters (``ops.convlstm``'s contract)
    out : (B, Ch, H, W) tensor or None, where to write the attention output (the decoder's concatenation buffer);
        None: a new channels-last tensor

    Returns
    -------
    The attention output (``out`` when given), or None, with nothing computed, where the kernel does not take this
    call: autograd needs a backward, not bf16 (after autocast's casts), not a level the resident kernel runs here,
    more than ``resident_lstm.MAX_ATTENTION_STEPS`` steps, an ``out`` it cannot write as it is, or switched off.
    """
    if x.device.type != "cuda" or switched_off("MSCRED_RESIDENT_ATTENTION"):
        return None
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return None
    x, weight, bias = fused.cast_inputs(x, weight, bias)
    B, T, _, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    if T > resident_lstm.MAX_ATTENTION_STEPS or not resident_lstm.runs(
            x.dtype, fused._layout(), False, Ch, k, H * W, x.device):
        return None
    if out is None:
        out = torch.empty(B, H, W, Ch, device=x.device, dtype=x.dtype).permute(0, 3, 1, 2)
    elif out.shape != (B, Ch, H, W) or not resident_lstm.attention_output_fits(out):
        return None
    with torch.autocast(x.device.type, enabled=False):
        convlstm_attention_resident(x, weight, bias, float(forget_bias), out)
    return out


@torch.library.custom_op("mscred::convlstm_attention_resident", mutates_args=("out",))
def convlstm_attention_resident(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
                                out: torch.Tensor) -> None:
    """The op behind ``resident_attention`` (its checks made): the input convolutions of all steps in one call (once
    per distinct step for sliding windows), then the resident kernel with the attention into ``out``."""
    C, k = x.shape[2], weight.shape[-1]
    pads = fused._padding(k)
    fmt = torch.channels_last
    w_x = weight[:, :C].contiguous(memory_format=fmt)
    w_h = weight[:, C:].contiguous(memory_format=fmt)
    gx = fused.step_gates(x, w_x, pads, fmt, shared=sliding(x))
    resident_lstm.run_attention(gx, bias, w_h, out, pads, forget_bias)


@convlstm_attention_resident.register_fake
def _(x, weight, bias, forget_bias, out):
    return None
