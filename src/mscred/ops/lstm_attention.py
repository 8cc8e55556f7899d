"""One ConvLSTM level and its temporal attention in one kernel, for bf16 inference: ``resident_attention``.

Where the window-resident kernel (``ops.resident_lstm``) runs a level (levels 1-2 of bf16 scoring), the window's
temporal attention is finished on the SM too: after a window's last step the block computes the scores <h_t, h_T>
/ T, their softmax over the steps and the weighted sum, and writes only that map. Apart, the kernel wrote all T
hidden maps to HBM and the attention kernel read them twice (the scores need all of h_T before any output element
is known); here h_T and h_{T-1} are still in the block's shared memory, and h_1 .. h_{T-2} go through a scratch slot
that each block reuses window after window, so they stay mostly in L2. The arithmetic is the attention kernel's
(float32 scores and sums of the bf16 maps, scores divided by T), in another summation order. On the H200 at the
scoring batch each level with its attention took 3.46 / 2.40 ms against 3.94 / 2.59 ms for the two kernels, and
the whole model's graphed scoring went from 9.15x to 9.69-9.72x the plain eager baseline
(``benchmarks/results/lstm_attention_batched/``, commit 714d519).

``MSCRED_RESIDENT_ATTENTION=0`` keeps the two kernels (A/B runs); ``MSCRED_RESIDENT_LSTM=0`` turns off both.
"""
from __future__ import annotations

import torch

from mscred.ops import resident_lstm
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
    The attention output (``out`` when given), or None, with nothing computed, where the kernel does not take the
    call (``takes``).
    """
    if not takes(x, weight, bias, out):
        return None
    x, weight, bias = fused.cast_inputs(x, weight, bias)
    if out is None:
        B, _, _, H, W = x.shape
        out = torch.empty(B, H, W, weight.shape[0] // 4, device=x.device, dtype=x.dtype).permute(0, 3, 1, 2)
    with torch.autocast(x.device.type, enabled=False):
        convlstm_attention_resident(x, weight, bias, float(forget_bias), out)
    return out


def takes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor | None) -> bool:
    """Whether ``resident_attention`` runs this call: no backward needed (the ConvLSTM's backward needs every h_t),
    bf16 after autocast's casts, at most ``resident_lstm.MAX_ATTENTION_STEPS`` steps, an ``out`` (if given) of the
    output's shape, device and dtype that the kernel writes as it is, not switched off, and a level the resident
    kernel runs on this device (``resident_lstm.runs``: checked last, it builds the extension on first use). Casts
    nothing: a call it declines costs no work."""
    if switched_off("MSCRED_RESIDENT_ATTENTION"):
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return False
    device_type = x.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else x.dtype
    B, T, _, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    if T > resident_lstm.MAX_ATTENTION_STEPS:
        return False
    if out is not None and not (out.shape == (B, Ch, H, W) and out.device == x.device and out.dtype == dtype
                                and resident_lstm.attention_output_fits(out)):
        return False
    return resident_lstm.runs(dtype, fused.buffer_layout(), False, Ch, k, H * W, x.device)


@torch.library.custom_op("mscred::convlstm_attention_resident", mutates_args=("out",))
def convlstm_attention_resident(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
                                out: torch.Tensor) -> None:
    """The op behind ``resident_attention`` (its checks made): the input convolutions of all steps in one call (once
    per distinct step for sliding windows), then the resident kernel with the attention into ``out``."""
    gx, w_h, pads = fused.gates_and_recurrent_weight(x, weight, "nhwc", save=False)
    resident_lstm.run_attention(gx, bias, w_h, out, pads, forget_bias)


@convlstm_attention_resident.register_fake
def _(x, weight, bias, forget_bias, out):
    return None
