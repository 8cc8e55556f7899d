"""The data gradient of a convolution whose kernel equals its stride (the encoder's conv3 and conv4) as one GEMM.

With kernel k = stride s and no padding, the taps do not overlap: input pixel (s*j + a, s*i + b) feeds output
pixel (j, i) through tap (a, b) alone, so the data gradient is, for every output pixel and every tap,

    dx[n, c, s*j + a, s*i + b] = sum_o dy[n, o, j, i] * w[o, c, a, b]

one GEMM of dy's channels-last rows (N*Ho*Wo, O) with the weight's channels-last memory read as (O, s*s*C) -- both
as they lie, no copy -- whose output row (n, j, i), column (a, b, c) is stored straight to its pixel of dx (runs of
s*C contiguous values). cuDNN runs this data gradient as an implicit-GEMM "dgrad" kernel: on the H200 in the
graphed bf16 training step (``benchmarks/results/next_1206/timeline/``) conv4's took 19.9 us and conv3's 23.3 us
for ~2.7 GFLOP each (batch 128 x 5 steps), where their forward convolutions took 11.3 and 11.6 us.

Opt-in, not yet measured (MSCRED_PHASE_DGRAD=1, ``enabled``): used by ``wgrad_stream``'s side-gradient convolution
(the fused bf16 training step's encoder) where ``applies``. float64 and devices without the kernels go to
``aten.convolution_backward``, as does everything else.
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import runs_fused, switched_on, tile_override, tl, triton

TILE = (128, 128, 8)  # rows (output pixels) x columns (taps x channels) a program, warps; MSCRED_PHASE_DGRAD_TILE


def enabled() -> bool:
    """Whether the side-gradient convolutions use this data gradient where it applies (MSCRED_PHASE_DGRAD=1)."""
    return switched_on("MSCRED_PHASE_DGRAD")


def applies(x_shape: torch.Size, w: torch.Tensor, stride: int, padding, transposed: bool) -> bool:
    """Whether the convolution of an input of ``x_shape`` with ``w`` (O, C, k, k) at ``stride`` and ``padding`` is
    one this module computes: not transposed, k = stride >= 2, no padding, the input exactly stride x the output
    (so every input pixel is some output pixel's tap), and a dtype the kernel takes."""
    k = w.shape[-1]
    return (not transposed and w.dim() == 4 and w.shape[-2] == k == stride >= 2 and tuple(padding) == (0, 0)
            and x_shape[1] == w.shape[1] and x_shape[2] % k == 0 and x_shape[3] % k == 0
            and w.dtype in (torch.bfloat16, torch.float16, torch.float32))


def dgrad(dy: torch.Tensor, w: torch.Tensor, x_shape: torch.Size) -> torch.Tensor:
    """dx (channels-last, ``x_shape``) of the convolution ``applies`` accepted, from ``dy`` (N, O, Ho, Wo)."""
    if not runs_fused(dy) or dy.dtype != w.dtype:
        return reference(dy, w, x_shape)
    return phase_dgrad(dy.contiguous(memory_format=torch.channels_last),
                       w.contiguous(memory_format=torch.channels_last), list(x_shape))


def reference(dy: torch.Tensor, w: torch.Tensor, x_shape: torch.Size) -> torch.Tensor:
    """The same through ``aten.convolution_backward`` (the tests' oracle, and the path off the kernels)."""
    s = w.shape[-1]
    x = torch.empty(x_shape, device=dy.device, dtype=dy.dtype).to(memory_format=torch.channels_last)
    return torch.ops.aten.convolution_backward(dy, x, w, None, [s, s], [0, 0], [1, 1], False, [0, 0], 1,
                                               [True, False, False])[0]


@torch.library.custom_op("mscred::phase_dgrad", mutates_args=())
def phase_dgrad(dy: torch.Tensor, w: torch.Tensor, x_shape: list[int]) -> torch.Tensor:
    """``dgrad`` on the kernel: dy and w channels-last, of one dtype."""
    N, C, H, W = x_shape
    O, s = w.shape[0], w.shape[-1]
    dx = torch.empty(N, C, H, W, device=dy.device, dtype=dy.dtype, memory_format=torch.channels_last)
    M, cols = dy.shape[0] * dy.shape[2] * dy.shape[3], s * s * C
    if M == 0 or C == 0:
        return dx
    if O == 0:
        return dx.zero_()
    block_m, block_n, warps = tile_override("MSCRED_PHASE_DGRAD_TILE", TILE, ("rows", "columns", "warps"))
    block_k = max(16, min(64, triton.next_power_of_2(O)))
    block_n = max(16, min(block_n, triton.next_power_of_2(cols)))
    grid = (triton.cdiv(M, block_m), triton.cdiv(cols, block_n))
    _phase_dgrad_kernel[grid](dy, w, dx, M, dy.shape[2] * dy.shape[3], dy.shape[3], O=O, C=C, S=s, WX=W,
                              PREC="tf32x3" if dy.dtype == torch.float32 else "tf32", BLOCK_M=block_m,
                              BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps)
    return dx


@phase_dgrad.register_fake
def _(dy, w, x_shape):
    return torch.empty(x_shape, device=dy.device, dtype=dy.dtype).to(memory_format=torch.channels_last)


if triton is not None:

    @triton.jit(do_not_specialize=["M", "HOWO", "WO"])
    def _phase_dgrad_kernel(dy_ptr, w_ptr, dx_ptr, M, HOWO, WO, O: tl.constexpr, C: tl.constexpr, S: tl.constexpr,
                            WX: tl.constexpr, PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr):
        """dx for BLOCK_M output pixels (rows (n, j, i) of dy) x BLOCK_N of the S*S*C columns (a, b, c): the dot
        over the O channels, stored at input pixel (S*j + a, S*i + b), channel c of the channels-last dx
        (WX: its width)."""
        r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        q = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask, qmask = r < M, q < S * S * C
        r64 = r.to(tl.int64)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in tl.static_range(0, O, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)
            kmask = k < O
            a = tl.load(dy_ptr + r64[:, None] * O + k[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
            b = tl.load(w_ptr + k[:, None] * (S * S * C) + q[None, :], mask=kmask[:, None] & qmask[None, :],
                        other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PREC)
        # row (n, j, i) -> input pixel (n, S*j, S*i); column (a, b, c) -> a rows and b pixels on, channel c
        n, p = r64 // HOWO, r64 % HOWO
        j, i = p // WO, p % WO
        row = ((n * (S * (HOWO // WO)) + S * j) * WX + S * i) * C
        col = (q // (S * C)) * (WX * C) + q % (S * C)
        tl.store(dx_ptr + row[:, None] + col[None, :], acc.to(dx_ptr.dtype.element_ty),
                 mask=rmask[:, None] & qmask[None, :])
