"""The training step's strided convolutions (encoder conv2-4, decoder deconv4-2): data gradients and forwards as
Triton GEMMs of our own.

A convolution of stride s sends input pixel (y, x) of its zero-padded input to output pixel (j, i) through tap
(y - s*j, x - s*i). Split the input's pixels by their phase (a, b) = (y mod s, x mod s): the pixels of one phase
meet the taps a + s*t, b + s*u only, at output pixel (y // s - t, x // s - u), so

    dx[n, c, y, x] = sum over the phase's taps (t, u) and over o of
                     dy[n, o, y//s - t, x//s - u] * w[o, c, a + s*t, b + s*u]

(dy zero outside its image): for each phase, a GEMM of dy's channels-last rows, shifted per tap, with the weight's
taps as they lie in its channels-last memory -- no im2col, no scattered adds, each dx pixel written once.

* "columns" (the default): every phase in the GEMM's columns. For kernel = stride (conv3, conv4) each phase has one
  tap, so the data gradient is one GEMM of dy's rows (N*Ho*Wo, O) with the weight's memory read as (O, s*s*C),
  each output row and column stored straight to its input pixel and channel (runs of s*C contiguous values). For a
  larger kernel (conv2's 3 x 3 at stride 2: phases of 4, 2, 2 and 1 taps) the rows are the phase grid's pixels and
  the GEMM is summed over the shifts (t, u), the taps a phase lacks read as zero weights (1.78x conv2's
  multiply-adds, in dots 4x wider than "taps"' and with dy read 4 times instead of 9). A pixel no tap reads (conv4
  convolves level 3's 9 x 9 [x, h] buffer, whose last row and column it skips) gets zero.
* "taps": a program per phase, row tile of that phase's pixels and column tile of C, summing its taps' dots (the
  taps a phase lacks are skipped): the exact multiply-adds, dots of C columns.
* "gather" (the decoder's transposed convolutions, stride 2): their data gradient is the strided convolution of dy
  with their own weight, an implicit GEMM whose rows are dx's pixels, gathering dy's pixel (s*j + ky - p,
  s*i + kx - p) for each tap, with the weight's channels-last memory read as each tap's (Cout, Cin).

Padding (symmetric, as the convolution's): the phases are of the padded input, and only its inner pixels are stored.

Why: cuDNN runs these data gradients as implicit-GEMM "dgrad" kernels which took, in the graphed bf16 training step
on the H200 (``benchmarks/results/next_1206/timeline/``, batch 128 x 5 steps), 49.4 us for conv2 (5.3 GFLOP),
23.3 for conv3 and 19.9 for conv4 (~2.7 GFLOP each), against 20.4, 11.6 and 11.3 us for their forward convolutions;
and deconv3's data gradient, a 2 x 2 stride-2 convolution of 1.07 GFLOP, 25.1 us (43 TFLOP/s).

The same "columns" and "taps" kernels are the decoder's transposed convolutions' forward, which is the data
gradient of a convolution with the same weight (``conv_transpose``, MSCRED_PHASE_DECONV=1), and the "gather"
kernel is the encoder's strided convolutions' forward (``conv``, MSCRED_PHASE_CONV=1).

Opt-in, not yet measured (MSCRED_PHASE_DGRAD=1, or some of the kernels: ``enabled``; MSCRED_PHASE_DECONV=1,
MSCRED_PHASE_CONV=1): used by ``wgrad_stream``'s side-gradient convolution (the fused bf16 training step's encoder
and decoder) where they apply. float64 and devices without the kernels go to cuDNN / ATen, as does everything
else; the weight gradients stay cuDNN's, on the side stream.
"""
from __future__ import annotations

import os

import torch

from mscred.ops.triton.runtime import runs_fused, switched_on, tile_override, tl, triton

TILES = {  # rows (pixels) x columns a program, warps; MSCRED_PHASE_DGRAD_TILE overrides all three
    "columns": (128, 128, 8),  # columns: taps x channels
    "taps": (128, 64, 4),  # columns: channels
    "gather": (128, 128, 8),  # columns: channels
}


KERNELS = ("columns", "taps", "gather")


def enabled(kernel: str) -> bool:
    """Whether the side-gradient convolutions use ``kernel`` where it applies: MSCRED_PHASE_DGRAD=1 every kernel,
    or the kernels named, "/"-separated (``columns``: the encoder's default kernel only, ``taps`` the encoder on the
    other one, ``gather`` the decoder's; "/" as the device scripts pass variables in comma-separated lists); unset
    or 0, none."""
    text = os.environ.get("MSCRED_PHASE_DGRAD", "").strip().lower()
    if switched_on("MSCRED_PHASE_DGRAD"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    names = text.split("/")
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        raise ValueError(f"MSCRED_PHASE_DGRAD must be 1, 0 or kernels of {'/'.join(KERNELS)} joined by '/', "
                         f"got {text!r}")
    return kernel in names


def chosen(x_shape: torch.Size, w: torch.Tensor, stride: int, padding, transposed: bool) -> str | None:
    """The kernel that computes this convolution's data gradient, where one ``applies`` and is ``enabled``; else
    None (cuDNN's)."""
    if not applies(x_shape, w, stride, padding, transposed):
        return None
    kernel = form(transposed)
    if enabled(kernel):
        return kernel
    return "taps" if not transposed and enabled("taps") else None


def applies(x_shape: torch.Size, w: torch.Tensor, stride: int, padding, transposed: bool) -> bool:
    """Whether the convolution of an input of ``x_shape`` with ``w`` ((O, C, k, k); transposed: (C, O, k, k)) at
    ``stride`` and symmetric ``padding`` is one this module computes: square kernel, stride >= 2 (stride 1 has one
    phase, a plain convolution), padding below k, a dtype the kernels take; not transposed, k >= stride as well (a
    kernel below the stride leaves pixels no tap reads)."""
    k = w.shape[-1]
    return (w.dim() == 4 and w.shape[-2] == k and stride >= 2 and (transposed or k >= stride)
            and x_shape[1] == w.shape[0 if transposed else 1] and all(0 <= p < k for p in padding)
            and w.dtype in (torch.bfloat16, torch.float16, torch.float32))


def form(transposed: bool) -> str:
    """Which kernel computes a data gradient by default: "gather" for a transposed convolution, else "columns"
    ("taps" computes the convolutions' too: the benchmark's comparison, and ``enabled`` can name it)."""
    return "gather" if transposed else "columns"


def deconv_enabled() -> bool:
    """Whether the side-gradient convolutions run transposed convolutions' forward on these kernels
    (MSCRED_PHASE_DECONV=1; off by default)."""
    return switched_on("MSCRED_PHASE_DECONV")


def deconv_applies(x: torch.Tensor, w: torch.Tensor, stride: int, padding) -> bool:
    """Whether ``conv_transpose`` computes the transposed convolution of ``x`` with ``w`` (Cin, Cout, k, k): it is
    the data gradient of the convolution with weight ``w`` read as (O, C) = (Cin, Cout), so where that one
    ``applies``, on the kernels' device with matching dtypes."""
    out_shape = torch.Size((x.shape[0], w.shape[1], *_deconv_size(x, w, stride, padding)))
    return (runs_fused(x) and x.dtype == w.dtype and min(out_shape[2:]) > 0
            and applies(out_shape, w, stride, padding, False))


def _deconv_size(x: torch.Tensor, w: torch.Tensor, stride: int, padding) -> tuple[int, int]:
    k = w.shape[-1]
    return (x.shape[2] - 1) * stride + k - 2 * padding[0], (x.shape[3] - 1) * stride + k - 2 * padding[1]


def conv_transpose(x: torch.Tensor, w: torch.Tensor, stride: int, padding=(0, 0)) -> torch.Tensor:
    """``F.conv_transpose2d(x, w, stride=stride, padding=padding)`` (channels-last) on the kernels, where
    ``deconv_applies``: the transposed convolution is the data gradient of the convolution with the same weight, so
    the "columns" kernel computes it with x as that dy. On the H200 cuDNN ran the decoder's as implicit-GEMM dgrad
    kernels: deconv2's 2.1 GFLOP took 20.1 us, deconv3's and deconv4's 9.5 and 8.5 us
    (``results/next_1206/timeline/``)."""
    out_shape = [x.shape[0], w.shape[1], *_deconv_size(x, w, stride, padding)]
    return strided_gemm(x.contiguous(memory_format=torch.channels_last),
                        w.contiguous(memory_format=torch.channels_last), out_shape, stride, list(padding), "columns")


def conv_enabled() -> bool:
    """Whether the side-gradient convolutions run strided convolutions' forward on the gather kernel
    (MSCRED_PHASE_CONV=1; off by default)."""
    return switched_on("MSCRED_PHASE_CONV")


def conv_applies(x: torch.Tensor, w: torch.Tensor, stride: int, padding) -> bool:
    """Whether ``conv`` computes the convolution of ``x`` with ``w`` (O, C, k, k): stride >= 2, a square kernel,
    padding below it, an output, matching dtypes the kernel takes, on the kernels' device."""
    k = w.shape[-1]
    return (runs_fused(x) and x.dtype == w.dtype and w.dtype in (torch.bfloat16, torch.float16, torch.float32)
            and w.dim() == 4 and w.shape[-2] == k and stride >= 2 and x.shape[1] == w.shape[1]
            and all(0 <= p < k for p in padding) and min(_conv_size(x, w, stride, padding)) > 0)


def _conv_size(x: torch.Tensor, w: torch.Tensor, stride: int, padding) -> tuple[int, int]:
    k = w.shape[-1]
    return (x.shape[2] + 2 * padding[0] - k) // stride + 1, (x.shape[3] + 2 * padding[1] - k) // stride + 1


def conv(x: torch.Tensor, w: torch.Tensor, stride: int, padding=(0, 0)) -> torch.Tensor:
    """``F.conv2d(x, w, stride=stride, padding=padding)`` (channels-last) on the "gather" kernel, where
    ``conv_applies``: it computes a transposed convolution's data gradient, which is the strided convolution of dy
    with that weight read as (O, C) -- here x with this one. On the H200 cuDNN's forward kernels took 20.4, 11.6 and
    11.3 us for the encoder's conv2-4 (5.3 and ~2.7 GFLOP: 230-260 TFLOP/s, ``results/next_1206/timeline/``)."""
    out_shape = [x.shape[0], w.shape[0], *_conv_size(x, w, stride, padding)]
    return strided_gemm(x.contiguous(memory_format=torch.channels_last),
                        w.contiguous(memory_format=torch.channels_last), out_shape, stride, list(padding), "gather")


def dgrad(dy: torch.Tensor, w: torch.Tensor, x_shape: torch.Size, stride: int, padding=(0, 0),
          transposed: bool = False, kernel: str | None = None) -> torch.Tensor:
    """dx (channels-last, ``x_shape``) of the convolution ``applies`` accepted, from ``dy`` (N, O, Ho, Wo).
    ``kernel``: "columns" or "taps" for a convolution (``form``'s choice by default)."""
    if not runs_fused(dy) or dy.dtype != w.dtype:
        return reference(dy, w, x_shape, stride, padding, transposed)
    return strided_gemm(dy.contiguous(memory_format=torch.channels_last),
                        w.contiguous(memory_format=torch.channels_last), list(x_shape), stride, list(padding),
                        form(transposed) if transposed or kernel is None else kernel)


def reference(dy: torch.Tensor, w: torch.Tensor, x_shape: torch.Size, stride: int, padding=(0, 0),
              transposed: bool = False) -> torch.Tensor:
    """The same through ``aten.convolution_backward`` (the tests' oracle, and the path off the kernels)."""
    x = torch.empty(x_shape, device=dy.device, dtype=dy.dtype).to(memory_format=torch.channels_last)
    return torch.ops.aten.convolution_backward(dy, x, w, None, [stride, stride], list(padding), [1, 1], transposed,
                                               [0, 0], 1, [True, False, False])[0]


def launch_blocks(kernel: str, reduced: int, columns: int) -> tuple[int, int, int, int]:
    """(rows, columns, reduced channels a program, warps) of ``kernel``'s launch for a GEMM summing ``reduced``
    channels into ``columns`` columns: the tile (``TILES``, or MSCRED_PHASE_DGRAD_TILE), its columns cut to the
    matrix's, the reduction in blocks of up to 64 (16 at least: the dot's smallest). The launches and
    ``benchmarks/strided_conv_sm90.py``'s compiles share it."""
    block_m, block_n, warps = tile_override("MSCRED_PHASE_DGRAD_TILE", TILES[kernel], ("rows", "columns", "warps"))
    block_n = max(16, min(block_n, triton.next_power_of_2(columns)))
    return block_m, block_n, max(16, min(64, triton.next_power_of_2(reduced))), warps


def _precision(dtype: torch.dtype) -> str:
    """The dots' precision: float32 keeps float32 accuracy (three TF32 products, as ``small_conv``); bf16 / fp16
    dots ignore it."""
    return "tf32x3" if dtype == torch.float32 else "tf32"


@torch.library.custom_op("mscred::strided_gemm", mutates_args=())
def strided_gemm(dy: torch.Tensor, w: torch.Tensor, x_shape: list[int], stride: int, padding: list[int],
                 kernel: str) -> torch.Tensor:
    """The data gradient (``x_shape``) of the convolution with ``w`` (its transposed convolution's for "gather") from
    ``dy`` on ``kernel``: dy and w channels-last, of one dtype. ``conv_transpose`` and ``conv`` call it with their
    input as dy."""
    N, C, H, W = x_shape
    O, k = w.shape[0], w.shape[-1]
    HO, WO = dy.shape[2], dy.shape[3]
    if kernel == "gather":
        return _gather(dy, w, x_shape, stride, padding)
    dx = torch.empty(N, C, H, W, device=dy.device, dtype=dy.dtype, memory_format=torch.channels_last)
    if dx.numel() == 0:
        return dx
    if O == 0 or HO * WO == 0:
        return dx.zero_()
    prec = _precision(dy.dtype)
    ph, pw = padding
    hp, wp = -(-(H + 2 * ph) // stride), -(-(W + 2 * pw) // stride)  # the largest phase's rows and columns
    tmax = -(-k // stride)  # taps a phase has at most, each way
    if kernel == "columns":
        cols = stride * stride * C
        block_m, block_n, block_k, warps = launch_blocks(kernel, O, cols)
        grid = (triton.cdiv(N * hp * wp, block_m), triton.cdiv(cols, block_n))
        _columns_kernel[grid](dy, w, dx, N * hp * wp, hp * wp, wp, HO, WO, H, ph, pw, O=O, C=C, K=k, S=stride,
                              TMAX=tmax, WX=W, PREC=prec, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                              num_warps=warps)
        return dx
    block_m, block_n, block_k, warps = launch_blocks(kernel, O, C)
    grid = (triton.cdiv(N * hp * wp, block_m), triton.cdiv(C, block_n), stride * stride)
    _taps_kernel[grid](dy, w, dx, N * hp * wp, hp * wp, wp, HO, WO, H, W, ph, pw, O=O, C=C, K=k, S=stride,
                       TMAX=tmax, PREC=prec, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                       num_warps=warps)
    return dx


def _gather(dy: torch.Tensor, w: torch.Tensor, x_shape: list[int], stride: int, padding: list[int]) -> torch.Tensor:
    """A transposed convolution's dx: the strided convolution of dy (N, Cout, HD, WD) with w (Cin, Cout, k, k)."""
    N, CI, H, W = x_shape
    CO, k = w.shape[1], w.shape[-1]
    HD, WD = dy.shape[2], dy.shape[3]
    dx = torch.empty(N, CI, H, W, device=dy.device, dtype=dy.dtype, memory_format=torch.channels_last)
    if dx.numel() == 0:
        return dx
    if CO == 0:
        return dx.zero_()
    block_m, block_n, block_k, warps = launch_blocks("gather", CO, CI)
    grid = (triton.cdiv(N * H * W, block_m), triton.cdiv(CI, block_n))
    _gather_kernel[grid](dy, w, dx, N * H * W, H * W, W, HD, WD, padding[0], padding[1], CI=CI, CO=CO, K=k,
                         S=stride, PREC=_precision(dy.dtype), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                         num_warps=warps)
    return dx


@strided_gemm.register_fake
def _(dy, w, x_shape, stride, padding, kernel):
    return torch.empty(x_shape, device=dy.device, dtype=dy.dtype).to(memory_format=torch.channels_last)


if triton is not None:

    @triton.jit(do_not_specialize=["M", "HPWP", "WP", "HO", "WO", "H", "PH", "PW"])
    def _columns_kernel(dy_ptr, w_ptr, dx_ptr, M, HPWP, WP, HO, WO, H, PH, PW, O: tl.constexpr, C: tl.constexpr,
                        K: tl.constexpr, S: tl.constexpr, TMAX: tl.constexpr, WX: tl.constexpr, PREC: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """Every phase in the columns: dx for BLOCK_M rows (n, yy, xx) of the phase grid (HPWP = its rows x WP
        columns) x BLOCK_N of the S*S*C columns (a, b, c), i.e. padded input pixel (S*yy + a, S*xx + b), channel c:
        for each shift (t, u) < TMAX, the dot of dy's pixel (yy - t, xx - u) (zero outside the HO x WO image) with
        the weight of tap (a + S*t, b + S*u) (zero where that tap is past the K x K kernel: the phase has fewer).
        Kernel = stride: one shift, dy's pixels the rows. Stored where the pixel is inside the H x WX input (PH, PW:
        the padding); a pixel no tap reads (a bordered input's last row) gets zero."""
        r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        q = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        qmask = q < S * S * C
        a, b, c = q // (S * C), (q // C) % S, q % C
        r64 = r.to(tl.int64)
        n, p = r64 // HPWP, r64 % HPWP
        yy, xx = (p // WP).to(tl.int32), (p % WP).to(tl.int32)
        rmask = r < M
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for t in tl.static_range(TMAX):
            for u in tl.static_range(TMAX):
                j, i = yy - t, xx - u
                inside = rmask & (j >= 0) & (j < HO) & (i >= 0) & (i < WO)
                src = ((n * HO + j) * WO + i) * O
                ky, kx = a + S * t, b + S * u
                wmask = qmask & (ky < K) & (kx < K)
                tap = (ky * K + kx) * C + c
                for k0 in tl.static_range(0, O, BLOCK_K):
                    k = k0 + tl.arange(0, BLOCK_K)
                    kmask = k < O
                    dyt = tl.load(dy_ptr + src[:, None] + k[None, :], mask=inside[:, None] & kmask[None, :],
                                  other=0.0)
                    wt = tl.load(w_ptr + k[:, None] * (K * K * C) + tap[None, :], mask=kmask[:, None] & wmask[None, :],
                                 other=0.0)
                    acc = tl.dot(dyt, wt, acc, input_precision=PREC)
        y = (S * yy - PH)[:, None] + a[None, :]
        x = (S * xx - PW)[:, None] + b[None, :]
        row = (n * H + S * yy - PH) * WX + S * xx - PW
        dst = row[:, None] * C + ((a * WX + b) * C + c)[None, :]
        tl.store(dx_ptr + dst, acc.to(dx_ptr.dtype.element_ty),
                 mask=(rmask[:, None] & qmask[None, :]) & (y >= 0) & (y < H) & (x >= 0) & (x < WX))

    @triton.jit(do_not_specialize=["M", "HPWP", "WP", "HO", "WO", "H", "W", "PH", "PW"])
    def _taps_kernel(dy_ptr, w_ptr, dx_ptr, M, HPWP, WP, HO, WO, H, W, PH, PW, O: tl.constexpr, C: tl.constexpr,
                     K: tl.constexpr, S: tl.constexpr, TMAX: tl.constexpr, PREC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """Phase (a, b) = divmod(program_id(2), S): dx for BLOCK_M of its pixels (rows (n, yy, xx) of the largest
        phase's grid, HPWP = its rows x WP columns; padded input pixel (S*yy + a, S*xx + b)) x BLOCK_N channels,
        summing over its taps (a + S*t, b + S*u) < K the dots of dy's pixel (yy - t, xx - u) (zero outside the
        HO x WO image) with the tap's (O, C) weight; stored where the pixel is inside the H x W input (PH, PW: the
        padding)."""
        r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        c = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        a, b = tl.program_id(2) // S, tl.program_id(2) % S
        cmask = c < C
        r64 = r.to(tl.int64)
        n, p = r64 // HPWP, r64 % HPWP
        yy, xx = (p // WP).to(tl.int32), (p % WP).to(tl.int32)
        y, x = S * yy + a - PH, S * xx + b - PW
        rmask = (r < M) & (y >= 0) & (y < H) & (x >= 0) & (x < W)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for t in tl.static_range(TMAX):
            for u in tl.static_range(TMAX):
                if (a + S * t < K) & (b + S * u < K):  # (phases of fewer taps skip the rest)
                    j, i = yy - t, xx - u
                    inside = rmask & (j >= 0) & (j < HO) & (i >= 0) & (i < WO)
                    src = ((n * HO + j) * WO + i) * O
                    tap = ((a + S * t) * K + (b + S * u)) * C
                    for k0 in tl.static_range(0, O, BLOCK_K):
                        k = k0 + tl.arange(0, BLOCK_K)
                        kmask = k < O
                        dyt = tl.load(dy_ptr + src[:, None] + k[None, :], mask=inside[:, None] & kmask[None, :],
                                      other=0.0)
                        wt = tl.load(w_ptr + k[:, None] * (K * K * C) + tap + c[None, :],
                                     mask=kmask[:, None] & cmask[None, :], other=0.0)
                        acc = tl.dot(dyt, wt, acc, input_precision=PREC)
        dst = ((n * H + y) * W + x) * C
        tl.store(dx_ptr + dst[:, None] + c[None, :], acc.to(dx_ptr.dtype.element_ty),
                 mask=rmask[:, None] & cmask[None, :])

    @triton.jit(do_not_specialize=["M", "HW", "W", "HD", "WD", "PH", "PW"])
    def _gather_kernel(dy_ptr, w_ptr, dx_ptr, M, HW, W, HD, WD, PH, PW, CI: tl.constexpr, CO: tl.constexpr,
                       K: tl.constexpr, S: tl.constexpr, PREC: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """A transposed convolution's dx for BLOCK_M of its pixels (rows (n, j, i), HW = H*W of them an image) x
        BLOCK_N of its CI channels: over the K x K taps, the dot of dy's pixel (S*j + ky - PH, S*i + kx - PW)
        (zero outside the HD x WD image) with the tap's weight, w[c, o, ky, kx] read from the channels-last
        (CI, K, K, CO) memory as (CO, CI)."""
        r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        c = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask, cmask = r < M, c < CI
        r64 = r.to(tl.int64)
        n, p = r64 // HW, r64 % HW
        j, i = (p // W).to(tl.int32), (p % W).to(tl.int32)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for ky in tl.static_range(K):
            for kx in tl.static_range(K):
                y, x = S * j + ky - PH, S * i + kx - PW
                inside = rmask & (y >= 0) & (y < HD) & (x >= 0) & (x < WD)
                src = ((n * HD + y) * WD + x) * CO
                for k0 in tl.static_range(0, CO, BLOCK_K):
                    o = k0 + tl.arange(0, BLOCK_K)
                    omask = o < CO
                    dyt = tl.load(dy_ptr + src[:, None] + o[None, :], mask=inside[:, None] & omask[None, :],
                                  other=0.0)
                    wt = tl.load(w_ptr + c[None, :] * (K * K * CO) + (ky * K + kx) * CO + o[:, None],
                                 mask=omask[:, None] & cmask[None, :], other=0.0)
                    acc = tl.dot(dyt, wt, acc, input_precision=PREC)
        tl.store(dx_ptr + r64[:, None] * CI + c[None, :], acc.to(dx_ptr.dtype.element_ty),
                 mask=rmask[:, None] & cmask[None, :])
