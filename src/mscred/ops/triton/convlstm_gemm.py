"""Levels 3-4's ConvLSTM convolutions as plain cuBLAS GEMMs over a 2 x 2 kernel's im2col, in the training op's
per-step path (``convlstm.py``; levels 1-2 take ``convlstm_concat.py``).

A 2 x 2 stride-1 convolution with TF's "same" border (one zero row and column, bottom and right) is, with
col[(b, y, x), (dy, dx, c)] = h[b, c, y + dy, x + dx] and Wm[(dy, dx, c), o] = W[o, c, dy, dx]:
    conv(h, W) = col @ Wm,    d col = dY @ Wm^T,    d W = col^T @ dY
(checked in float64 by ``benchmarks/bench_im2col_levels.py --check`` and its test). At 8 x 8 and 4 x 4 pixels a
step is a GEMM of only 8,192 / 2,048 rows, where cuDNN's implicit-GEMM kernels ran 1.26-1.56x slower than cuBLAS on
the same arithmetic (results/im2col_levels/, H200, bf16, batch 128).

The data gradient: one GEMM of the gate gradients' channels-last rows as stored gives d col, whose four tap blocks
the backward cell kernel sums as it reads them (``DHR_TAPS``): no im2col of h is needed.

Measured and removed (results/im2col_step/, recoverable from 97ce8d7): the forward cell kernel writing h_t as its
im2col, so that the recurrent convolution and its weight gradient were GEMMs too -- 2.757 / 2.773 against 2.772 /
2.768 ms a step in alternation, no gain despite the per-call numbers.
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import switched_off


def dgrad_by_gemm(layout: str, k: int, pads, like: torch.Tensor) -> bool:
    """Whether the per-step training backward takes the recurrent data gradient as one GEMM, d(im2col) = dpre rows
    @ W_h's (4Ch x 4Ch) matrix, whose four tap blocks the backward cell kernel sums as it reads them (DHR_TAPS),
    instead of cuDNN's data-gradient call: channels-last buffers and a 2 x 2 kernel with TF's "same" border (bottom
    and right) -- the training step's levels 3-4 (levels 1-2 take the concatenated path). Measured on the H200, bf16,
    batch 128: per call 13.0 against 19.3 us at level 3, 12.0 against 18.8 at level 4 (results/im2col_levels/); the
    graphed step 2.77 / 2.78 against 2.81 / 2.83 ms in alternation (results/dgrad_gemm/). The default, but for
    float32 on CUDA (``like``: the op's input), where cuDNN convolves in TF32 and the GEMM would run in full float32
    (not measured); MSCRED_LSTM_DGRAD_GEMM=0 keeps cuDNN's call (A/B runs)."""
    if like.is_cuda and like.dtype == torch.float32:
        return False
    return (not switched_off("MSCRED_LSTM_DGRAD_GEMM") and layout == "nhwc" and k == 2
            and tuple(pads) == (0, 1, 0, 1))


def recurrent_dgrad_taps(dpre_t: torch.Tensor, w_h: torch.Tensor) -> torch.Tensor:
    """d(im2col of h_{t-1}) of step t's recurrent convolution: dpre_t (B, 4Ch, H, W) channels-last as rows (B*H*W,
    4Ch) @ W_h as (4Ch, (dy, dx, c)) -> (B, 4 Ch, H, W) channels-last, channel block k = 2 dy + dx the share of tap
    (dy, dx) (h at (y, x) gets it from pixel (y - dy, x - dx))."""
    B, G, H, W = dpre_t.shape
    rows = dpre_t.permute(0, 2, 3, 1).reshape(B * H * W, G)  # a view of the channels-last buffer
    # W_h as (4Ch, (dy, dx, c)): a view of the channels-last weight, no copy per step
    dcol = rows @ w_h.permute(0, 2, 3, 1).reshape(G, -1)
    return dcol.view(B, H, W, -1).permute(0, 3, 1, 2)
