"""deconv1 (a stride-1 transposed convolution, 64 -> 3, 3 x 3, TF crop) on its own weight, without flipping it.

``small_conv`` runs deconv1 as the convolution it equals after the crop, whose weight is deconv1's transposed and
flipped (``small_conv.deconv_as_conv``): a copy of the weight each forward (2.6 us in the graphed training step's
time line, ``results/next_1206/timeline/``), its gradient flipped back by autograd (1.8 us), and the data gradient's
convolution flipping it once more (2.0 us) -- three small launches on the chain. The flip is only an order:

* forward (``small_conv_taps``, deconv1's form): the GEMM's weight columns are deconv1's channels-last memory as it
  lies, whose taps come reversed, and the gather reads the convolution's tap t from column k*k - 1 - t
  (``TRANSPOSED``; the taps summed in the same order);
* weight gradient: the convolution's, with the taps-in-N kernel storing tap t as tap k*k - 1 - t
  (``REVERSE_TAPS``), then one strided copy into the weight's own layout, as ``small_conv``'s;
* data gradient: the adjoint of the convolution with the flipped kernel is the convolution with deconv1's weight
  itself, read as a (Ci, Co) convolution weight: no flip at all.

Where those forms do not run (their switches off, other sizes), the flipped weight is made as before. The values are
the same as ``small_conv.conv_act(x, deconv_as_conv(w), ...)``'s, bit for bit (the same products and sums; the
weight and bias gradients to the order of their atomic adds, which a GPU does not fix).
The default (MSCRED_DECONV_DIRECT=0 turns it off, ``enabled``): alone it took the graphed bf16 training step 2.375 ->
2.355 ms on the H200 (benchmarks/results/defaults_1205/) and 17-23 us less in each of four alternations on an H100
(benchmarks/results/direct_interleaved_1205/); with the interleaved levels (``model.interleaved_levels``) it gained
nothing on either card (benchmarks/results/final_1205/), so those stay opt-in.
"""
from __future__ import annotations

import torch

from mscred.ops.triton import small_conv, small_conv_taps
from mscred.ops.triton.runtime import switched_off


def enabled() -> bool:
    """Whether the fused decoder runs deconv1 on its own weight (MSCRED_DECONV_DIRECT=0 turns it off)."""
    return not switched_off("MSCRED_DECONV_DIRECT")


def deconv_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, selu: bool) -> torch.Tensor:
    """``small_conv.conv_act(x, small_conv.deconv_as_conv(weight), bias, selu)`` for a transposed convolution's
    weight (Ci, Co, k, k), k odd, without the flipped copy; differentiable in x, weight and bias."""
    k = weight.shape[-1]
    if weight.dim() != 4 or weight.shape[-2] != k or k % 2 != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"deconv_act needs an odd square kernel from x's {x.shape[1]} channels, got weight "
                         f"{tuple(weight.shape)}")
    if not small_conv._runs_fused(x) or x.dtype == torch.float64:
        return small_conv.conv_act(x, small_conv.deconv_as_conv(weight), bias, selu)
    return small_deconv_fused(x, weight.to(x.dtype), bias.contiguous(), bool(selu))


@torch.library.custom_op("mscred::small_deconv_fused", mutates_args=())
def small_deconv_fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, selu: bool) -> torch.Tensor:
    """Fused forward (see ``deconv_act``): x and weight of one dtype, bias contiguous (float32 under autocast)."""
    CI, CO, KS = weight.shape[0], weight.shape[1], weight.shape[-1]
    if small_conv_taps.suits(CI, CO, KS):  # deconv1's form: the taps beside the output channels
        return small_conv_taps.forward(x, weight, bias, selu, (0, 0, 0, 0), small_conv._precision(x.dtype),
                                       transposed=True)
    return small_conv._forward(x, small_conv.deconv_as_conv(weight), bias, selu)


@small_deconv_fused.register_fake
def _(x, weight, bias, selu):
    return torch.empty(x.shape[0], weight.shape[1], *x.shape[2:], device=x.device, dtype=x.dtype,
                       memory_format=torch.channels_last)


@torch.library.custom_op("mscred::small_deconv_fused_backward", mutates_args=())
def small_deconv_fused_backward(dout: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                                selu: bool, need_dx: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of ``small_deconv_fused``; dx (0,) when not ``need_dx``; dweight in the weight's dtype
    and layout, dbias float32."""
    CI, CO, KS = weight.shape[0], weight.shape[1], weight.shape[-1]
    dout = dout.to(x.dtype)
    dw, db, reversed_taps = small_conv.weight_grad(dout, x, out, selu, CO, KS, reverse_taps=True)
    rows = dw.view(KS * KS, CI, CO)
    if not reversed_taps:  # (a form without the reversed store: the flip on the float32 rows)
        rows = rows.flip(0)
    # row tap t' = (ky, kx) of the transposed convolution's own kernel: weight[ci, co, ky, kx]
    dweight = torch.empty_like(weight)
    dweight.copy_(rows.view(KS, KS, CI, CO).permute(2, 3, 0, 1))
    if not need_dx:
        return x.new_empty(0), dweight, db
    # The adjoint of the convolution with the flipped, transposed kernel: the convolution with weight itself,
    # a (Ci, Co, k, k) convolution weight from Co channels to Ci.
    dx = small_conv._forward(small_conv.act_grad(dout, out, selu), weight, None, False)
    return dx, dweight, db


@small_deconv_fused_backward.register_fake
def _(dout, x, weight, out, selu, need_dx):
    dx = torch.empty_like(x, memory_format=torch.channels_last) if need_dx else x.new_empty(0)
    return dx, torch.empty_like(weight), torch.empty(weight.shape[1], device=x.device, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, weight, bias, selu = inputs
    ctx.save_for_backward(x, weight, output)
    ctx.selu, ctx.bias_dtype = selu, bias.dtype


def _backward(ctx, dout):
    x, weight, out = ctx.saved_tensors
    need_dx = ctx.needs_input_grad[0]
    dx, dweight, db = small_deconv_fused_backward(dout, x, weight, out, ctx.selu, need_dx)
    return (dx if need_dx else None), dweight, db.to(ctx.bias_dtype), None


small_deconv_fused.register_autograd(_backward, setup_context=_setup_context)
