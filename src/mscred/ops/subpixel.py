"""A strided transposed convolution as one stride-1 convolution producing every output phase ("sub-pixel").

The transposed convolution of stride s and kernel k adds x[i] * w[kk] into row s * i + kk of its full output. Row
r = s * j + a (phase a in [0, s)) thus collects the taps kk = a + s * t of the inputs i = j - t, t in [0, T) with
T = ceil(k / s). So all s * s phases of the output are ONE ordinary T x T convolution of x zero-padded by T - 1 on
every side, with s * s * O output channels ordered (phase row a, phase column b, output channel o):

    sub[b_, (a * s + b) * O + o, j, i] = full[b_, o, s * j + a, s * i + b]        j, i in [0, m + T - 1)

whose weight holds w[c, o, a + s * (T - 1 - ty), b + s * (T - 1 - tx)] at tap (ty, tx) (zero where that tap index
reaches past k). Its output covers the full transposed output (s * (m + T - 1) >= s * (m - 1) + k rows; the extra
rows are zeros of the padding) and is read back through the phase mapping by ``bias_act``'s shuffled forward, which
also crops TF-style and adds bias + SELU.

Why: for the decoder's deconv2 (3 x 3, stride 2, 128 -> 32 channels, 15 x 15 -> 30 x 30), cuDNN ran the transposed
convolution as an sm80 dgrad kernel taking 1.03 ms for the 3,591 windows of a scoring call on the H200, ~58
TFLOP/s (``benchmarks/results/ablations/tf32x3.md``); as a 2 x 2 convolution to 128 channels (1.8x the multiply-adds,
the zero taps included) it is the shape of the ConvLSTM's recurrent convolutions, which cuDNN runs near the tensor
cores' rate.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def taps(kernel: int, stride: int) -> int:
    """T: taps per dimension of the sub-pixel convolution (ceil(kernel / stride))."""
    return -(-kernel // stride)


def pays(kernel: int, stride: int) -> bool:
    """Whether the sub-pixel form applies with profit: strided (s >= 2) with overlapping taps (k > s). A kernel of at
    most the stride has no overlap (T = 1): cuDNN's transposed convolution is already one GEMM there."""
    return stride >= 2 and kernel > stride


def weight(w: torch.Tensor, stride: int) -> torch.Tensor:
    """The sub-pixel convolution's weight (s*s*O, C, T, T) from the transposed convolution's w (C, O, k, k), in w's
    dtype, contiguous."""
    C, O, k, _ = w.shape
    s, T = stride, taps(k, stride)
    # Zero-extend the kernel to s * T taps per dimension, then tap (ty, tx) of phase (a, b) is
    # w[..., a + s * (T - 1 - ty), b + s * (T - 1 - tx)]: reverse the tap order inside each phase.
    wz = w.new_zeros(C, O, s * T, s * T)
    wz[:, :, :k, :k] = w
    wz = wz.view(C, O, T, s, T, s).flip(2, 4)                       # [c, o, ty, a, tx, b]
    sub = wz.permute(3, 5, 1, 0, 2, 4).reshape(s * s * O, C, T, T)  # [(a, b, o), c, ty, tx]
    return sub.contiguous()


def convolve(x: torch.Tensor, w: torch.Tensor, stride: int) -> torch.Tensor:
    """The phases of ``conv_transpose2d(x, w, stride=stride)`` (no bias): (B, s*s*O, m + T - 1, m + T - 1) for an
    (B, C, m, m) x, channels ordered (a, b, o) (see the module docstring)."""
    T = taps(w.shape[-1], stride)
    sub = weight(w, stride)
    if x.is_contiguous(memory_format=torch.channels_last):  # the weight in x's order: no copy inside cuDNN's call
        sub = sub.contiguous(memory_format=torch.channels_last)
    return F.conv2d(x, sub, None, padding=T - 1)


def unshuffle(sub: torch.Tensor, stride: int) -> torch.Tensor:
    """The full transposed output (B, O, s * H', s * W') from ``convolve``'s phases (B, s*s*O, H', W') in PyTorch
    ops: the tests' check of the phase order, and the path without Triton."""
    B, C4, H, W = sub.shape
    s = stride
    O = C4 // (s * s)
    return sub.reshape(B, s, s, O, H, W).permute(0, 3, 4, 1, 5, 2).reshape(B, O, H * s, W * s)

