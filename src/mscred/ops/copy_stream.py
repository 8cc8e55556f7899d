"""Copies that no kernel of the next few waits for, queued on a side CUDA stream and joined before their reader.

In the fused bf16 training step the concatenated ConvLSTM path (``ops/triton/convlstm_concat.py``) copies:
- forward, every x_t into the [x_t, h_{t-1}] buffer ``xh``: the first step's convolution reads only x_0 (level 1)
  or the images themselves (level 2), so steps 1..T-1's copies can run beside step 0's kernels;
- backward, each step's dx_t out of the transposed convolution's [dx_t, dh_{t-1}] into the input gradient: the
  chain goes on with dh_{t-1} only, and the input gradient is read after the level's last step.
On one stream these copies sit in the step's dependent chain (~40 us forward, ~20 us backward on the H200, levels
1-2, ``results/train_final_1203w/train_profile.txt``); on a side stream they overlap the chain's latency-bound
kernels, as the weight gradients do (``wgrad_stream``), whose stream they do not share: the copies are joined
within the op, and behind the weight gradients they would wait for them.

``Aside(like)`` holds one op call's queued copies; ``copy`` queues one, ``join`` makes the current stream wait for
them. Where the switch is off (``MSCRED_COPY_STREAM=0``), or the tensors are not on CUDA, ``copy`` copies in place
and ``join`` does nothing. The allocator: a copy's source is marked as used by the side stream (the caller may drop
it before the join); the destination is the caller's, read only after the join.
"""
from __future__ import annotations

from typing import Callable

import torch

from mscred.ops.padding import copy_pixels
from mscred.ops.triton.runtime import switched_off

_STREAMS: dict[int, "torch.cuda.Stream"] = {}


def switched(x: torch.Tensor) -> bool:
    """Whether copies of CUDA tensor ``x``'s op may go to the side stream (MSCRED_COPY_STREAM=0: never)."""
    return x.is_cuda and not switched_off("MSCRED_COPY_STREAM")


def _side(device: torch.device) -> "torch.cuda.Stream":
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _STREAMS:  # created in the eager warm-up every capture follows, never inside a capture
        _STREAMS[key] = torch.cuda.Stream(device=device)
    return _STREAMS[key]


class Aside:
    """One op call's copies on the side stream of ``like``'s device (or in place: ``switched``)."""

    def __init__(self, like: torch.Tensor):
        self.side = _side(like.device) if switched(like) else None
        self.pending = False

    def copy(self, dst: torch.Tensor, src: torch.Tensor,
             fn: Callable[[torch.Tensor, torch.Tensor], None] = copy_pixels) -> None:
        """``fn(dst, src)`` after everything queued so far on the current stream; on the side stream if any."""
        if self.side is None:
            fn(dst, src)
            return
        caller = torch.cuda.current_stream(dst.device)
        self.side.wait_stream(caller)
        with torch.cuda.stream(self.side):
            fn(dst, src)
        src.record_stream(self.side)
        self.pending = True

    def join(self) -> None:
        """Make the current stream wait for the queued copies (before anything reads their destinations)."""
        if self.pending:
            torch.cuda.current_stream(self.side.device).wait_stream(self.side)
            self.pending = False
