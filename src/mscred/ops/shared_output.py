"""One activation read by two consumers, its two gradients summed inside the producer's backward kernel.

In the training encoder a level's activation (its zero-bordered buffer) is read by the ConvLSTM and by the next
strided convolution. Autograd sums the two gradients of a tensor with two consumers before the producer's backward
runs: an add kernel over the whole buffer, reading two and writing one (three of them in a training step, 50 us on
the H200, ``benchmarks/results/step_profile_1201c/``), after which the producer's backward reads the sum once more.
Here the producer returns the buffer twice -- itself and a view of it, one per consumer -- so that the two
gradients reach its backward apart, and its fused backward kernel (``bias_act``, the small convolution) reads both
and sums them in registers.

On by default since 2026-12-01: the graphed bf16 step on the H200 took 3.26-3.27 ms with it against 3.32-3.33 ms
without, in alternation in one run (``benchmarks/results/shared_grads/``). ``MSCRED_SHARED_GRADS=0`` turns it off
(A/B runs).
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import switched_off


def enabled() -> bool:
    """Whether the training encoder hands its shared buffers out as two outputs (default; MSCRED_SHARED_GRADS=0
    turns it off)."""
    return not switched_off("MSCRED_SHARED_GRADS")


class SharedOutput(torch.autograd.Function):
    """``producer.forward(*inputs)`` -> (out, second, saved tensors), returned as (out, second), ``second`` a view of
    out where it is None, else a second copy of out's values the producer stored (the x half of a ConvLSTM's [x, h]
    buffer, ``ops.encoder_xh``); backward hands both outputs' gradients (either may be None) to
    ``producer.backward(saved, g1, g2, needs_input_grad)``, which returns the inputs' gradients. ``producer`` holds
    the call's non-tensor arguments."""

    @staticmethod
    def forward(ctx, producer, *inputs):
        out, second, saved = producer.forward(*inputs)
        ctx.producer = producer
        ctx.save_for_backward(*saved)
        return out, out.view_as(out) if second is None else second

    @staticmethod
    def backward(ctx, g1, g2):
        if g1 is None:
            g1, g2 = g2, None
        n = len(ctx.needs_input_grad) - 1
        if g1 is None:
            return (None,) * (n + 1)
        return (None, *ctx.producer.backward(ctx.saved_tensors, g1, g2, ctx.needs_input_grad[1:]))
