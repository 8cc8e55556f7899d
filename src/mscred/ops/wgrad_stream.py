"""Weight gradients on a side CUDA stream, joined where the step's weight casts take their gradients back.

In the fused bf16 training step nothing but the optimizer reads a convolution's weight gradient, and the optimizer
runs after the whole backward. The data gradients, on the other hand, are one dependent chain (decoder, attention,
the ConvLSTM's steps, encoder), and many of its kernels are latency-bound: levels 3-4's per-step kernels fill a
fraction of the SMs, level 1's conv + cell kernels run three warpgroups an SM. So each weight-gradient call (cuDNN's
wgrad kernels, ~0.4 ms of the 2.6 ms graphed step on the H200, `results/train_final_1203/train_profile.txt`) can be
queued on a side stream as soon as its inputs exist, to run beside the chain instead of in it.

The join: the gradients are read first by the weight cache's backward (``weight_cache._CastAll``, one node for every
cast weight of the step, which runs when the last of them arrives), which makes the current stream wait for the side
stream first. Only weights that came from that cache (``weight_cache.made_here``) are eligible: anything else would
hand a gradient straight to AccumulateGrad on the caller's stream. ``join`` is also called after ``loss.backward()``
by the Trainer, so a capture never ends with the side stream unjoined.

The allocator: the side stream's inputs are marked as used by it (``record_stream``) and its outputs as used by the
caller's stream, so that neither stream's allocations reuse memory the other may still read; during a CUDA graph
capture the allocator defers such frees to the end of the capture.

On by default (``MSCRED_WGRAD_STREAM=0`` turns it off): on the H200 the graphed bf16 training step took
2.459 / 2.485 ms against 2.574 / 2.586 ms on one stream, and 2.478 / 2.478 against 2.584 / 2.592 ms in a second call,
in alternation (``benchmarks/results/wgrad_stream/``, ``results/wgrad_stream_prio/``; ``bash
benchmarks/gpu_wgrad_stream.sh``): ~0.11 ms, 4%. Not adopted from the same runs: levels 2-4 on side streams as well
(``level_streams``, 2.552 / 2.558 ms) and the step captured on a higher-priority stream than the side stream's
(2.482 / 2.481 ms: no difference). The arithmetic is the same calls on the same data. Measured and removed since:
the side stream on a CUDA green context of 100 or 66 SMs, 2.485 / 2.518 ms against 2.415 ms (``results/green_wgrad/``,
commit 86da0fc). Why the chain still waits beside these gradients: ``results/step_launch_stats/`` (their clusters).

Opt-in, not yet measured: ``MSCRED_WGRAD_SPLIT=k`` computes each weight gradient (of at least
``MSCRED_WGRAD_SPLIT_MIN_GFLOP``, 0 by default) as k calls over k slices of the images, summed (``weight_grad``). Why:
each cuDNN weight gradient is one wave of blocks that each fill an SM's register file for the kernel's whole duration
(level 1's: 110 blocks for 83 us), so a clustered data gradient of the chain waits the whole kernel for SMs (77 us,
``results/next_1206/timeline/``); stream or node priorities cannot help while no block ends
(``results/graph_priority/``). k calls end their blocks k times as often, and at each end a higher-priority chain
kernel can take the SMs (``benchmarks/graph_priority.py --split k``).
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

# (weight_cache imports this module too, for ``join``: each uses the other only inside functions, so either import
# order works -- tests/test_wgrad_stream.py imports both)
from mscred.ops import weight_cache
from mscred.ops.triton import strided_conv
from mscred.ops.triton.runtime import switched_off

SPLIT_VARIABLE = "MSCRED_WGRAD_SPLIT"
SPLIT_MIN_VARIABLE = "MSCRED_WGRAD_SPLIT_MIN_GFLOP"

_STREAMS: dict[int, "torch.cuda.Stream"] = {}
_PENDING: set[int] = set()  # device indices whose side stream has work the caller's stream has not waited for
_LOCAL = threading.local()  # ``allowed``: set around a backward whose weights the cast cache's backward joins


def switched(x: torch.Tensor) -> bool:
    """Whether weight gradients of CUDA tensor ``x`` may go to a side stream (MSCRED_WGRAD_STREAM=0: never)."""
    return x.is_cuda and not switched_off("MSCRED_WGRAD_STREAM")


@contextlib.contextmanager
def allowed(flag: bool) -> Iterator[None]:
    """Within the block, ``run`` uses the side stream when ``flag`` (the op's weights are joined by the cast cache's
    backward; a thread-local, as autograd runs a device's backward on its own thread)."""
    before = getattr(_LOCAL, "allowed", False)
    _LOCAL.allowed = flag
    try:
        yield
    finally:
        _LOCAL.allowed = before


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _side(device: torch.device) -> "torch.cuda.Stream":
    key = _index(device)
    if key not in _STREAMS:  # created in the eager warm-up every capture follows, never inside a capture
        _STREAMS[key] = torch.cuda.Stream(device=device)
    return _STREAMS[key]


def run(fn: Callable[[], Sequence[torch.Tensor]], reads: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
    """``fn()``, whose tensors are weight gradients computed from ``reads``: on the device's side stream, after
    everything queued so far on the current one, when the switch is on and ``allowed``; else here."""
    x = reads[0]
    if not (getattr(_LOCAL, "allowed", False) and switched(x)):
        return fn()
    caller = torch.cuda.current_stream(x.device)
    side = _side(x.device)
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        outs = fn()
    for t in reads:
        t.record_stream(side)
    for t in outs:
        t.record_stream(caller)
    _PENDING.add(_index(x.device))
    return outs


def join(device: torch.device) -> None:
    """Make the current stream of ``device`` wait for its side stream's weight gradients, if any are queued."""
    if device.type != "cuda":
        return
    key = _index(device)
    if key in _PENDING:
        torch.cuda.current_stream(device).wait_stream(_STREAMS[key])
        _PENDING.discard(key)


def split_count() -> int:
    """How many calls a weight gradient is split into (``MSCRED_WGRAD_SPLIT``, a positive integer; 1 by default)."""
    text = os.environ.get(SPLIT_VARIABLE, "").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{SPLIT_VARIABLE} must be a positive integer, got {text!r}")
    return int(text)


def split_min_gflop() -> float:
    """The smallest weight gradient that is split, in GFLOP (``MSCRED_WGRAD_SPLIT_MIN_GFLOP``; 0 by default: every
    one). The ConvLSTM levels' are 17-38 GFLOP in the step, the encoder's and decoder's 0.5-5.3: a threshold of 10
    splits the side stream's long kernels only and leaves the tail's (conv2's) one call."""
    text = os.environ.get(SPLIT_MIN_VARIABLE, "").strip() or "0"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"{SPLIT_MIN_VARIABLE} must be a number of GFLOP >= 0, got {text!r}")
    return value


def weight_grad(grad: torch.Tensor, x: torch.Tensor, w: torch.Tensor, conv: Sequence) -> torch.Tensor:
    """``aten.convolution_backward``'s weight gradient of the convolution ``conv`` (its stride, padding, dilation,
    transposed, output padding and groups) of images ``x`` giving ``grad``: one call, or with ``MSCRED_WGRAD_SPLIT=k``
    (for a gradient of at least ``split_min_gflop``) the sum of k calls over k slices of the images (dim 0): each
    call's result is rounded to ``w``'s dtype, and their sum is taken in float32 (float64 for float64) and rounded
    once more."""
    pieces = min(split_count(), x.shape[0])
    macs = (x if conv[3] else grad).numel() * w[0].numel()  # (a transposed convolution's x is its output's image)
    if pieces > 1 and 2 * macs < split_min_gflop() * 1e9:
        pieces = 1
    if pieces == 1:
        return torch.ops.aten.convolution_backward(grad, x, w, None, *conv, [False, True, False])[1]
    parts = [torch.ops.aten.convolution_backward(g, xs, w, None, *conv, [False, True, False])[1]
             for g, xs in zip(torch.tensor_split(grad, pieces), torch.tensor_split(x, pieces))]
    if pieces == 2:  # one kernel: the sum is taken in float32 and rounded once either way
        return parts[0] + parts[1]
    # float32 or wider (parts[0] itself where it is that already: a buffer of this call's own)
    total = parts[0].to(torch.promote_types(parts[0].dtype, torch.float32))
    for part in parts[1:]:
        total.add_(part)
    return total.to(w.dtype)


def conv2d(x: torch.Tensor, w: torch.Tensor, stride: int, padding: tuple[int, int] = (0, 0),
           transposed: bool = False) -> torch.Tensor:
    """``F.conv2d(x, w, None, stride, padding)`` (``F.conv_transpose2d(x, w, None, stride)`` when ``transposed``),
    whose weight gradient goes to the side stream where the switch is on and ``w`` is a cast of the step's cache;
    else the plain call, with PyTorch's own backward."""
    if switched(x) and weight_cache.made_here(w):
        return _SideWeightGradConv.apply(x, w, stride, padding, transposed)
    if transposed:
        return F.conv_transpose2d(x, w, None, stride=stride, padding=padding)
    return F.conv2d(x, w, None, stride=stride, padding=padding)


class _SideWeightGradConv(torch.autograd.Function):
    """A bias-free convolution whose backward makes the data gradient here and the weight gradient on the side
    stream: the same two cuDNN calls PyTorch's convolution backward makes, as two ``convolution_backward`` calls.
    Opt-in (``ops/triton/strided_conv.py``): its strided forward and data gradient on Triton kernels of our own."""

    @staticmethod
    def forward(ctx, x, w, stride, padding, transposed):
        ctx.save_for_backward(x, w)
        ctx.conv = ([stride, stride], list(padding), [1, 1], transposed, [0, 0], 1)
        if transposed and strided_conv.deconv_enabled() and strided_conv.deconv_applies(x, w, stride, padding):
            return strided_conv.conv_transpose(x, w, stride, padding)  # (opt-in: ops/triton/strided_conv.py)
        if transposed:
            return F.conv_transpose2d(x, w, None, stride=stride, padding=padding)
        if strided_conv.conv_enabled() and strided_conv.conv_applies(x, w, stride, padding):
            return strided_conv.conv(x, w, stride, padding)  # (opt-in: ops/triton/strided_conv.py)
        return F.conv2d(x, w, None, stride=stride, padding=padding)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        dx = None
        stride, padding, transposed = ctx.conv[0][0], ctx.conv[1], ctx.conv[3]
        kernel = ctx.needs_input_grad[0] and strided_conv.chosen(x.shape, w, stride, padding, transposed)
        if kernel:  # (opt-in: ops/triton/strided_conv.py)
            dx = strided_conv.dgrad(grad, w, x.shape, stride, padding, transposed, kernel=kernel)
        elif ctx.needs_input_grad[0]:
            dx = torch.ops.aten.convolution_backward(grad, x, w, None, *ctx.conv, [True, False, False])[0]
        with allowed(True):  # w came from the cast cache (``conv2d``), whose backward joins
            (dw,) = run(lambda: (weight_grad(grad, x, w, ctx.conv),), (grad, x))
        return dx, dw, None, None, None
