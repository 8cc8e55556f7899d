"""Run MSCRED's four ConvLSTM + attention levels side by side on CUDA streams.

The four levels are independent from the encoder's outputs to the decoder's inputs, but one stream runs their
~40 kernels per step one after another, and many of them do not fill an H200 (level 4's ConvLSTM is 2,048 pixels
of 1,024 gates; its cell kernels move ~1 MB). Here level 1, the largest, stays on the caller's stream and levels 2-4
each get a side stream, forked from and joined back to the caller's stream, so the GPU overlaps a small level's
kernels with the big level's memory-bound cell kernels and the tails of its convolutions. Forward and backward
(autograd runs a backward op on the stream of its forward op) and inside CUDA graph capture (the side streams
fork from the capturing stream and join it before the capture ends, as torch.cuda.graph requires).

One autograd function, ``_CrossStreams``, marks where a tensor crosses streams, each way:

* a level's input, caller -> side: forward, the side stream waits for the caller; backward, the caller waits for
  the side stream before it uses the input's gradient.
* a level's output, side -> caller: forward, the caller waits for the side stream; backward, the side stream
  waits for the caller before it reads the output's gradient.

It also calls ``record_stream`` on the tensor that crosses, so that the caching allocator does not hand its
memory to another tensor of the producing stream while the consuming stream may still read it (during graph
capture the allocator defers such frees to the end of the capture).

The arithmetic is the same kernels on the same data: results equal the one-stream run's up to the convolution
algorithms cuDNN picks.

Opt-in (``MSCRED_LEVEL_STREAMS=1``), because it did not pay: on the H200 (2026-11-29, one run,
``benchmarks/results/level_streams/``) the graphed bf16 training step took 4.42 ms with side streams against
4.32 ms on one stream, fp32 6.96 vs 6.80 ms, and inference stayed within 1%. Each level's kernels already keep
the card busy (the step's 4.1 ms of kernel time is 4.3 ms of wall time on one stream), so overlapping them only
makes them compete for the same HBM bandwidth and SMs. Measured again with the faster kernels of 2026-12-01
(``results/streams_again/``): 3.057 / 3.071 ms with side streams against 2.978 / 2.971 ms, in alternation. Kept,
tested on the GPU, for larger sensor counts or cards where that balance differs.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import torch

from mscred.ops.triton.runtime import switched_on


def enabled(x: torch.Tensor) -> bool:
    """Whether levels run on side streams for input ``x``: CUDA tensors when MSCRED_LEVEL_STREAMS=1 (opt-in)."""
    return x.is_cuda and switched_on("MSCRED_LEVEL_STREAMS")


def level_order(count: int) -> list[int]:
    """The order (0-based) in which the one-stream path calls the ``count`` levels: MSCRED_LEVEL_ORDER, the levels
    numbered from 1 ("1234": level 1 first), else the last level first ("4321"). The outputs are the same whatever
    the order; what it changes is the backward's. Autograd runs the ready backward nodes latest-created first, so
    the level called first in the forward has its ConvLSTM backward run last, right before the encoder's backward,
    and its side-stream weight gradient beside the encoder's data gradients. Level 1 first, that gradient (cuDNN,
    110 blocks of 384 threads, bound by its bytes) ran alone for 89 of its 96 us while the encoder's next data
    gradient waited for SMs; level 4 first, level 4's two (38 + 46 us, x and h) do, and level 1's runs beside levels
    2-4's backward instead: the graphed bf16 step 2.574-2.577 -> 2.562-2.567 ms in 6 rounds of alternation on an H100
    (results/level_order_ab2/; level 3 or 2 first were slower than level 1 first, results/level_order_ab/; the
    time lines, results/level_order_timeline/). A string that is not a permutation of 1..count is refused."""
    text = os.environ.get("MSCRED_LEVEL_ORDER", "").strip()
    if not text:
        return list(range(count))[::-1]
    order = [int(c) - 1 for c in text if c.isdigit()]
    if sorted(order) != list(range(count)) or len(order) != len(text.replace(",", "")):
        raise ValueError(f"MSCRED_LEVEL_ORDER={text!r}: want a permutation of the levels 1..{count}, e.g. "
                         f"{''.join(str(i) for i in range(1, count + 1))!r}")
    return order


_STREAMS: dict[tuple[int, int], "torch.cuda.Stream"] = {}


def _side_stream(device: torch.device, slot: int) -> "torch.cuda.Stream":
    """The ``slot``-th side stream of ``device``, created once (not inside a capture: the eager warm-up that every
    graph capture follows creates them)."""
    key = (device.index if device.index is not None else torch.cuda.current_device(), slot)
    if key not in _STREAMS:
        _STREAMS[key] = torch.cuda.Stream(device=device)
    return _STREAMS[key]


class _CrossStreams(torch.autograd.Function):
    """Hand ``x`` from stream ``src`` to stream ``dst``: forward, ``dst`` waits for ``src`` and the allocator learns
    that ``dst`` uses x; backward (run on the stream this was called on), the mirror image for the gradient.
    A level's input crosses caller -> side (called on the caller's stream), its output side -> caller."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, src, dst):
        ctx.src, ctx.dst = src, dst
        dst.wait_stream(src)
        x.record_stream(dst)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if grad is not None:
            ctx.src.wait_stream(ctx.dst)
            grad.record_stream(ctx.src)
        return grad, None, None


def run_levels(fns: Sequence[Callable[[torch.Tensor], torch.Tensor]],
               inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``[fn(x) for fn, x in zip(fns, inputs)]``, the first on the caller's stream and the others each on a side
    stream when ``enabled`` (see the module docstring), else one after another in ``level_order``.

    Parameters
    ----------
    fns : callables, one per level (the AttnConvLSTM modules)
    inputs : tensors, one per level, on one CUDA device when streams are used

    Returns
    -------
    list of the outputs, in order; each safe to use on the caller's stream.
    """
    if len(fns) != len(inputs):
        raise ValueError(f"run_levels got {len(fns)} functions for {len(inputs)} inputs")
    if len(fns) < 2 or not enabled(inputs[0]):
        outs = [None] * len(fns)
        for i in level_order(len(fns)):
            outs[i] = fns[i](inputs[i])
        return outs
    caller = torch.cuda.current_stream(inputs[0].device)
    outs: list = [None] * len(fns)
    # Side levels are launched first: the caller's level-1 kernels queue behind nothing of theirs, and the CPU
    # launches the small levels' kernels while the GPU already works.
    for slot, (fn, x) in enumerate(zip(fns[1:], inputs[1:]), start=1):
        side = _side_stream(x.device, slot)
        x_side = _CrossStreams.apply(x, caller, side)
        with torch.cuda.stream(side):
            y = fn(x_side)
        outs[slot] = _CrossStreams.apply(y, side, caller)
    outs[0] = fns[0](inputs[0])
    return outs
