"""Copies whose results are read later, queued on a side CUDA stream beside the chain of dependent kernels.

The concatenated-gates ConvLSTM (``ops/triton/convlstm_concat.py``) copies at level 2, on the training step's chain:
in the forward, every x_t into the zero-bordered [x_t, h_{t-1}] buffer (11 us, then 3 us zeroing h_{-1}) before
step 0, which reads the images themselves; in the backward, each step's dx_t out of cuDNN's [dx_t, dh_{t-1}]
(~3 us a step) into the level's input gradient, which nothing reads until the encoder's backward, ~0.3 ms later
(``results/graph_timeline_fold/``). Here those copies run on a side stream from the moment their inputs exist; the
chain waits for them where their result is first read (``join``: before step 1's convolution; at the end of the
level's backward).

The allocator: the tensors a copy reads are marked as used by the side stream (``record_stream``), so that the
caller's stream does not reuse their memory before the copy is done (inside a CUDA graph capture the allocator
defers such frees to the end of the capture); what it writes belongs to buffers the caller made and reads only
after ``join``.

``MSCRED_LSTM_SIDE_COPIES=1`` turns it on (opt-in until measured on the GPU).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

import torch

from mscred.ops.triton.runtime import switched_on

_STREAMS: dict[int, "torch.cuda.Stream"] = {}


def enabled(x: torch.Tensor) -> bool:
    """Whether copies beside the chain of CUDA tensor ``x`` go to the side stream (MSCRED_LSTM_SIDE_COPIES=1)."""
    return x.is_cuda and switched_on("MSCRED_LSTM_SIDE_COPIES")


def _side(device: torch.device) -> "torch.cuda.Stream":
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _STREAMS:  # created in the eager warm-up every capture follows
        _STREAMS[key] = torch.cuda.Stream(device=device)
    return _STREAMS[key]


@contextlib.contextmanager
def beside(x: torch.Tensor, reads: Sequence[torch.Tensor]) -> Iterator[Optional["torch.cuda.Stream"]]:
    """The block's work on the side stream of ``x``'s device, after everything queued so far on the current one,
    when ``enabled(x)``; else here. Yields the side stream (None when the block runs here); ``reads`` are the
    tensors the block reads."""
    if not enabled(x):
        yield None
        return
    caller = torch.cuda.current_stream(x.device)
    side = _side(x.device)
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        yield side
    for t in reads:
        t.record_stream(side)


def join(side: Optional["torch.cuda.Stream"], device: torch.device) -> None:
    """Make the current stream of ``device`` wait for ``side``'s copies (``beside``'s stream; None: nothing)."""
    if side is not None:
        torch.cuda.current_stream(device).wait_stream(side)
