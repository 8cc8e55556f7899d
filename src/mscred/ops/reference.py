"""Pure PyTorch twins of the fast ops: the test oracle, the CPU path and the "plain PyTorch eager" baseline.

Each function has exactly the signature and contract of its dispatcher in ``mscred.ops`` (read the docstrings
there). They are deliberately straightforward — one convolution per ConvLSTM step, no hoisting, no fusion — because
the benchmarks compare the fast backends against this code as it stands.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int, int]:
    """TensorFlow "same" padding of a square input: (top, bottom, left, right).

    The output has ceil(size / stride) rows; the total padding needed for that is split with the smaller half on
    top/left and the extra row/column at the bottom/right, as TensorFlow does (PyTorch's symmetric padding differs
    whenever the total is odd, e.g. a 2x2 stride-2 convolution of a 15x15 input).

    Parameters
    ----------
    size : int
        Height (= width) of the input.
    kernel : int
        Kernel height (= width).
    stride : int
        Stride in both directions.
    """
    out = -(-size // stride)  # ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    before = total // 2
    after = total - before
    return before, after, before, after


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
           padding: tuple[int, int, int, int], selu: bool) -> torch.Tensor:
    """2-D convolution with explicit (top, bottom, left, right) zero padding, plus bias, then SELU if ``selu``.

    Parameters
    ----------
    x : (N, C, H, W) tensor
    weight : (O, C, kh, kw) tensor
    bias : (O,) tensor or None
    stride : int
    padding : (top, bottom, left, right)
    selu : bool

    Returns
    -------
    (N, O, Ho, Wo) tensor
    """
    top, bottom, left, right = padding
    y = F.conv2d(F.pad(x, (left, right, top, bottom)), weight, bias, stride=stride)
    return F.selu(y) if selu else y


def convlstm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float) -> torch.Tensor:
    """A ConvLSTM over all steps of one level from h = c = 0, one convolution per step over concat([x_t, h]) (over
    x_0 alone at the first step, where h = 0).

    Parameters
    ----------
    x : (B, T, C, H, W) tensor
        Input of every step.
    weight : (4*Ch, C + Ch, k, k) tensor
        Gate convolution acting on concat([x_t, h_{t-1}]) along channels (MSCRED uses Ch = C). Output channel
        blocks are TensorFlow's gate order: i, g (candidate), f, o.
    bias : (4*Ch,) tensor
    forget_bias : float
        Added to the forget gate pre-activation (TensorFlow's ConvLSTMCell uses 1.0).

    Returns
    -------
    (B, T, Ch, H, W) tensor
        The hidden state h_t of every step.
    """
    B, T, C, H, W = x.shape
    top, bottom, left, right = same_padding(H, weight.shape[-1], 1)  # stride 1: H and W are kept
    pad = (left, right, top, bottom)
    h = c = None  # h_0 = c_0 = 0
    outputs = []
    # unbind, not x[:, t]: each select's backward zero-fills a gradient of x's whole size (T of them, O(T^2) bytes;
    # 4-9% of a CPU training step in two profiles), unbind's backward stacks the T slices once. Same values.
    for x_t in x.unbind(1):
        if h is None and x.device.type == "cpu":
            # The first step: h_0 = 0 adds nothing to the gate convolution, so it runs on x_0 with the input half
            # of the weight: a tenth less ConvLSTM convolution work at T = 5 (on a 2-core CPU the training step
            # ran 1.10x faster, its weights bit-equal to the concatenation's after 8 and 12 steps). CPU only: on
            # a GPU this function is the plain-PyTorch baseline the fused backend's speed is measured against.
            z = F.conv2d(F.pad(x_t, pad), weight[:, :C], bias)  # (B, 4*Ch, H, W)
        else:
            if h is None:   # (the baseline's first step as it was: zero h and c, concatenated and multiplied)
                h = c = x_t.new_zeros(B, weight.shape[0] // 4, H, W)
            xh = F.pad(torch.cat([x_t, h], dim=1), pad)  # (B, C + Ch, H + k-1, W + k-1)
            z = F.conv2d(xh, weight, bias)  # (B, 4*Ch, H, W)
        h, c = cell_update(z, c, forget_bias)
        outputs.append(h)
    return torch.stack(outputs, dim=1)  # (B, T, Ch, H, W)


def cell_update(z: torch.Tensor, c: Optional[torch.Tensor], forget_bias: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One ConvLSTM cell step from the gate pre-activations z (B, 4*Ch, H, W), blocks i, g, f, o, and the previous
    cell state c (None: zero, the first step): (h, c) of this step.
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * tanh(g);  h = sigmoid(o) * tanh(c)"""
    i, g, f, o = z.chunk(4, dim=1)
    c_new = torch.sigmoid(i) * torch.tanh(g)
    c = c_new if c is None else torch.sigmoid(f + forget_bias) * c + c_new
    return torch.sigmoid(o) * torch.tanh(c), c


def temporal_attention(h: torch.Tensor) -> torch.Tensor:
    """MSCRED's attention: a_k = softmax_k(<H_k, H_T> / T), out = sum_k a_k H_k (no learned weights).

    Parameters
    ----------
    h : (B, T, C, H, W) tensor
        Hidden states of every step; the inner product runs over C, H, W of each sample.

    Returns
    -------
    (B, C, H, W) tensor
    """
    B, T = h.shape[:2]
    flat = h.reshape(B, T, -1)  # (B, T, C*H*W)
    # The scores sum thousands of products: under bf16/fp16 autocast accumulate them in float32.
    acc = flat.float() if flat.dtype in (torch.float16, torch.bfloat16) else flat
    scores = (acc * acc[:, -1:]).sum(dim=-1) / T  # (B, T)
    a = torch.softmax(scores, dim=1).to(h.dtype)  # (B, T)
    return (a[:, :, None, None, None] * h).sum(dim=1)  # (B, C, H, W)
