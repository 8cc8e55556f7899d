"""Stride-1 TF-"same" convolutions with few channels on one side, + bias (+ SELU), in Triton.

    out = act(conv2d(x, weight, padding=k // 2) + bias)        x (N, Ci, H, W), weight (Co, Ci, k, k), k odd

MSCRED has two such layers: the encoder's conv1 (3 -> 32, 3 x 3) and the decoder's deconv1 (64 -> 3, 3 x 3,
stride 1), which after its TF crop is this convolution with the flipped, transposed kernel (``deconv_as_conv``).
Why a kernel of ours: cuDNN has no tensor-core kernel for 3 channels in channels-last bf16. On the H200 (bf16,
batch 640 / 128, cuDNN autotuned, benchmarks/results/conv_layers.md) conv1 took 0.100 ms forward and 0.144 ms
for its weight gradient, 10 and 7 TFLOP/s, and deconv1 0.19 ms for forward + both gradients, 5-7 TFLOP/s:
~0.4 ms of the ~4.3 ms graphed bf16 training step for ~1% of its arithmetic. Both layers are memory-bound (conv1
reads 3 channels and writes 32: ~40 MB, ~10 us at HBM speed).

The kernels (channels-last or NCHW input, any strides):

* forward: an implicit GEMM over output pixels, K = k*k*Ci taps gathered with their zero padding by masks,
  weight as a (K, Co) matrix, fp32 accumulation on the tensor cores, bias (float32) and SELU in the epilogue.
  With many input and few output channels (deconv1) the taps go beside the output channels instead
  (``small_conv_taps``: the input read once; deconv1's training call 34.1 -> 24.5 us on the H200).
* weight gradient: the same patches against dz = dout * act'(out) (SELU's derivative from the output, as
  PyTorch's ``elu_backward(is_result=True)``), each program looping over many pixel tiles and adding its (K, Co)
  partial sums and the bias gradient's column sums with one atomic add each at the end. With many input and few
  output channels (deconv1: 64 -> 3) the taps go to the other side of the product instead: x is read once, as it
  lies, and dz gathered at every tap's shift, dW[tap, ci, co] = sum_p x[p, ci] * dz[p - offset(tap), co] (the
  per-tap form read x once per tap: 54 us for deconv1's call in the training step, ``results/concat_levels/``;
  the op's call 0.075 -> 0.038 ms, the graphed bf16 step 3.015-3.025 -> 2.961-2.974 ms in alternation,
  ``results/small_conv_gather/``).
* data gradient (deconv1's input needs one; conv1's, the raw data, does not): the forward kernel on dz with the
  flipped, transposed weight (for a stride-1 symmetric-padded convolution that is its adjoint).

float64 runs the PyTorch ops (Triton's float64 dot is not usable on every GPU; the tests' oracle dtype). float32
keeps float32 accuracy with three TF32 products per product on the tensor cores (see ``_precision``); the model
uses the op in bf16 / fp16 only (see ``suits``).
"""
from __future__ import annotations

import os
from typing import Optional

import torch
import torch.nn.functional as F

from mscred.ops import encoder_xh
from mscred.ops.padding import interior, pad_copy
from mscred.ops.shared_output import SharedOutput
from mscred.ops.triton import runtime as _runtime
from mscred.ops.triton import small_conv_taps
from mscred.ops.triton.bias_act import SELU_ALPHA, SELU_SCALE
from mscred.ops.triton.runtime import interpreting as _interpreting
from mscred.ops.triton.runtime import runs_fused as _runs_fused
from mscred.ops.triton.runtime import tl, triton

FWD_BLOCK_P, FWD_WARPS = 128, 4  # the forward's tile (output pixels) and warps (benchmarks/bench_small_tiles.py)
MAX_BLOCK_N = 64         # output channels per program (more go to a second grid axis)
# The weight gradient's pixels per tile, warps, and programs per SM (each loops over every PROGRAMS-th tile and adds
# its partial sums once): 128 x 4 warps x 8 per SM ran the training step's two calls (conv1, deconv1) in 0.132 ms
# against 0.138 ms with the earlier 4 per SM (CUDA-graph replays, benchmarks/bench_bwd_tiles.py,
# results/step_profile_1201c/bwd_tiles/, H200). Since deconv1 takes the taps-in-N form this tile is conv1's alone,
# at the step's tail, beside conv2's cuDNN weight gradient on the side stream -- whose one-thread workspace kernel
# waited ~41 us for a free SM behind 8 programs an SM (results/graph_timeline_fold/). 2 per SM leaves it room: the
# graphed step 2.423 / 2.425 / 2.425 -> 2.417 / 2.417 / 2.415 ms in alternation (4 per SM 2.413 / 2.422 / 2.420;
# results/conv1_wgrad_share/). MSCRED_SMALL_CONV_WGRAD_TILE="BLOCK_P/warps/programs-per-SM" overrides (A/B runs).
WGRAD_BLOCK_P, WGRAD_WARPS, WGRAD_PROGRAMS_PER_SM = 128, 4, 2
# The same for the taps-in-N form: 256 x 4 warps x 1 per SM was the fastest of 24 settings on the training step's
# deconv1 call, its whole op 0.0383 ms against the per-tap form's 0.0746 ms (CUDA-graph replays,
# benchmarks/bench_small_conv_wgrad.py, results/small_conv_gather/sweep/, H200; 8 per SM 0.064 ms: every program adds
# a (Ci, k*k*Co) partial sum atomically). MSCRED_SMALL_CONV_WGRAD_GATHER_TILE overrides;
# MSCRED_SMALL_CONV_WGRAD_GATHER=0 keeps those layers on the per-tap form (A/B runs).
GATHER_BLOCK_P, GATHER_WARPS, GATHER_PROGRAMS_PER_SM = 256, 4, 1


def is_available() -> tuple[bool, str]:
    """(True, "") when the kernels can run here: Triton and a CUDA device, or Triton's CPU interpreter."""
    return _runtime.is_available("fused small-channel conv")


def suits(in_channels: int, out_channels: int, kernel: int, stride: int, dtype: torch.dtype) -> bool:
    """Whether a layer should use this op: stride 1, odd kernel, and few channels on one side (cuDNN's weak case:
    fewer than 8, the tensor-core granule) with at most MAX_BLOCK_N on the other (the weight-gradient kernel keeps
    all output channels of a tap block in one program), in bf16 / fp16.

    float32 stays on cuDNN: with float32 accuracy (exact or tf32x3 dots) our kernels made the graphed float32 step
    slower on the H200 (6.78 ms with cuDNN, 9.50 exact, 10.22 tf32x3; results/ablations/). MSCRED_SMALL_CONV=0
    turns the op off (cuDNN everywhere), =all uses it for float32 too (A/B runs, and the CPU interpreter's tests of
    the whole fused float32 model)."""
    choice = os.environ.get("MSCRED_SMALL_CONV", "1").strip().lower()
    if choice in ("0", "false", "no", "off"):
        return False
    if dtype not in (torch.bfloat16, torch.float16) and not (choice == "all" and dtype == torch.float32):
        return False
    return (stride == 1 and kernel % 2 == 1 and min(in_channels, out_channels) < 8
            and out_channels <= MAX_BLOCK_N)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], selu: bool) -> torch.Tensor:
    """The same arithmetic in PyTorch ops (the tests' oracle, and the path without Triton / for float64)."""
    z = F.conv2d(x, weight, None if bias is None else bias.to(x.dtype), padding=weight.shape[-1] // 2)
    return F.selu(z) if selu else z


def conv_act(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], selu: bool,
             out_pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> torch.Tensor:
    """``act(conv2d(x, weight, padding=k // 2) + bias)`` with act = SELU if ``selu``, else identity.

    Parameters
    ----------
    x : (N, Ci, H, W) tensor, any strides (channels-last is what the fused model passes)
    weight : (Co, Ci, k, k) tensor of x's dtype, k odd
    bias : (Co,) tensor or None; may be float32 while x is bf16 (autocast): added in float32
    selu : bool
    out_pads : (top, bottom, left, right)
        Return the result inside a zero border of these widths (as ``bias_act``'s out_pads): written there
        directly, for the training encoder's zero-bordered ConvLSTM input; the border's gradient is discarded.

    Returns
    -------
    (N, Co, H, W) tensor (bordered by ``out_pads``) of x's dtype, channels-last. Differentiable in x, weight and
    bias.
    """
    k = weight.shape[-1]
    if weight.dim() != 4 or weight.shape[-2] != k or k % 2 != 1 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"conv_act needs an odd square kernel over x's {x.shape[1]} channels, got weight "
                         f"{tuple(weight.shape)}")
    if not _runs_fused(x) or x.dtype == torch.float64:
        out = reference(x, weight, bias, selu)
        return pad_copy(out.contiguous(memory_format=torch.channels_last), tuple(out_pads)) if any(out_pads) else out
    if bias is None:
        bias = torch.zeros(weight.shape[0], device=x.device, dtype=torch.float32)
    return small_conv_fused(x, weight.to(x.dtype), bias.contiguous(), bool(selu), [int(p) for p in out_pads])


def conv_act_shared(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, selu: bool,
                    out_pads: tuple[int, int, int, int], xh_images: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``conv_act(x, weight, bias, selu, out_pads)`` for two consumers: (out, a view of out), whose two gradients
    the weight gradient's kernel sums itself (``ops.shared_output``). Where the kernels do not run: (out, out).

    ``xh_images`` > 0 (where the kernels run): the second output is instead the x half of a new [x, h] buffer
    (``ops.encoder_xh``) that the kernel stores the values into as well, h_{-1} zeroed in its first ``xh_images``
    images."""
    if not _runs_fused(x) or x.dtype == torch.float64:
        if xh_images:
            raise ValueError("conv_act_shared: the [x, h] buffer is written by the fused kernel only")
        out = conv_act(x, weight, bias, selu, out_pads)
        return out, out
    return SharedOutput.apply(_SharedConv(bool(selu), tuple(int(p) for p in out_pads), int(xh_images)), x,
                              weight.to(x.dtype), bias.contiguous())


class _SharedConv:
    """``small_conv_fused`` with a bordered output as a ``shared_output.SharedOutput`` producer; with
    ``xh_images``, ``small_conv_fused_xh``."""

    def __init__(self, selu: bool, pads: tuple[int, ...], xh_images: int = 0):
        self.selu, self.pads, self.xh_images = selu, pads, xh_images

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        if self.xh_images:
            out, xh = small_conv_fused_xh(x, weight, bias, self.selu, list(self.pads), self.xh_images)
            return out, xh[:, :out.shape[1]], (x, weight, out, bias)
        out = small_conv_fused(x, weight, bias, self.selu, list(self.pads))
        return out, None, (x, weight, out, bias)

    def backward(self, saved, g1, g2, needs_input_grad):
        x, weight, out, bias = saved
        dx, dweight, db = small_conv_fused_backward(interior(g1, self.pads), x, weight, interior(out, self.pads),
                                                    self.selu, needs_input_grad[0],
                                                    None if g2 is None else interior(g2, self.pads))
        return (dx if needs_input_grad[0] else None), dweight, db.to(bias.dtype)


def deconv_as_conv(weight: torch.Tensor) -> torch.Tensor:
    """The conv2d weight (Co, Ci, k, k) equal to a stride-1 ``conv_transpose2d`` weight (Ci, Co, k, k) followed by
    TF's "same" crop of k // 2 rows and columns on each side: the kernel transposed and flipped."""
    return weight.transpose(0, 1).flip(2, 3)


if triton is not None:
    from mscred.ops.triton.bias_act import selu_of  # (a jit helper: defined only with Triton)

    _SCALE = tl.constexpr(SELU_SCALE)
    _SCALE_ALPHA = tl.constexpr(SELU_SCALE * SELU_ALPHA)

    @triton.jit
    def _pixels(q0, P, HW, W, BLOCK_P: tl.constexpr):
        """Pixels q0 .. q0 + BLOCK_P of the N*H*W output: mask, batch (int64), row, column; each (BLOCK_P,)."""
        q = q0 + tl.arange(0, BLOCK_P)
        r = q % HW
        return q < P, (q // HW).to(tl.int64), r // W, r % W

    @triton.jit
    def _tile_origin(t, TX, TPI, ROWS: tl.constexpr, COLS: tl.constexpr):
        """Tile ``t`` of ROWS x COLS pixels, ``TX`` tiles a row band and ``TPI`` an image: its image (int64), first
        row and first column (scalars)."""
        r = t % TPI
        return (t // TPI).to(tl.int64), (r // TX) * ROWS, (r % TX) * COLS

    @triton.jit
    def _tile_pixels(t, H, W, TX, TPI, ROWS: tl.constexpr, COLS: tl.constexpr):
        """Tile ``t`` (``_tile_origin``): its image (a scalar, int64) and its pixels' mask, row and column, each
        (ROWS * COLS,). One image a tile, so that the tile's base address is one scalar and the pixels' offsets
        int32 (per-element int64 batch offsets cost the weight gradient half its registers); COLS a power of two,
        so that row and column are shifts."""
        b, y0, x0 = _tile_origin(t, TX, TPI, ROWS, COLS)
        i = tl.arange(0, ROWS * COLS)
        y = y0 + i // COLS
        x = x0 + i % COLS
        return b, (y < H) & (x < W), y, x

    @triton.jit
    def _flat_patches(x_ptr, x_sc, x_sy, x_sx, pmask, y, x, k, H, W, CI: tl.constexpr, KS: tl.constexpr):
        """The (BLOCK_P, BLOCK_K) im2col block of flat taps ``k`` (k = (ky * KS + kx) * CI + ci, all taps of all
        channels in one block: few input channels) of one image's pixels (``x_ptr`` its base), zero outside the
        image (the padding) and for k >= KS*KS*CI. CI and KS are compile-time constants, so the divisions below
        are multiply-shifts."""
        tap = k // CI
        ci = k % CI
        iy = y[:, None] + (tap // KS - KS // 2)[None, :]
        ix = x[:, None] + (tap % KS - KS // 2)[None, :]
        m = (pmask[:, None] & (k < KS * KS * CI)[None, :] & (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W))
        return tl.load(x_ptr + ci[None, :] * x_sc + iy * x_sy + ix * x_sx, mask=m, other=0.0)

    @triton.jit
    def _tap_patches(x_ptr, x_sc, x_sy, x_sx, pmask, y, x, dy, dx, ci, H, W, CI: tl.constexpr):
        """The (BLOCK_P, BLOCK_C) block of channels ``ci`` of one tap (offset dy, dx) of one image's pixels
        (``x_ptr`` its base): one row of contiguous channels per pixel in channels-last order (vector loads), zero
        outside the image."""
        iy = y + dy
        ix = x + dx
        valid = pmask & (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
        row = x_ptr + iy * x_sy + ix * x_sx
        return tl.load(row[:, None] + ci[None, :] * x_sc, mask=valid[:, None] & (ci < CI)[None, :], other=0.0)

    @triton.jit(do_not_specialize=["P", "H", "W", "PT", "PL", "HD", "WD"])
    def _small_conv_fwd_kernel(x_ptr, x_sb, x_sc, x_sy, x_sx, w_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                               P, H, W, PT, PL, HD, WD, CI: tl.constexpr, CO: tl.constexpr,
                               KS: tl.constexpr, SELU: tl.constexpr, HAS_BIAS: tl.constexpr, FLAT: tl.constexpr,
                               PREC: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr,
                               BLOCK_N: tl.constexpr, BORDER: tl.constexpr):
        """FLAT: all KS*KS*CI taps in one BLOCK_K block (few input channels, e.g. 3); else a loop over the taps,
        each in blocks of BLOCK_K contiguous channels (e.g. deconv1's 64). BORDER: the output is HD x WD with the
        (H x W) result at (PT, PL) and zeros around it (a bordered output); the grid covers all of it."""
        _small_conv_fwd_program(x_ptr, x_sb, x_sc, x_sy, x_sx, w_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                P, H, W, PT, PL, HD, WD, o_ptr, 0, 0, 0, 0, 0, CI, CO, KS, SELU, HAS_BIAS, FLAT, PREC,
                                BLOCK_P, BLOCK_K, BLOCK_N, BORDER, False)

    # The same storing its result a second time (``_forward``'s ``h0_images``): a kernel of its own, so that the
    # first one's arguments and sm_90 code stay as they were before the second output existed.
    @triton.jit(do_not_specialize=["P", "H", "W", "PT", "PL", "HD", "WD", "H0"])
    def _small_conv_fwd_xh_kernel(x_ptr, x_sb, x_sc, x_sy, x_sx, w_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                  P, H, W, PT, PL, HD, WD, o2_ptr, o2_sb, o2_sc, o2_sy, o2_sx, H0,
                                  CI: tl.constexpr, CO: tl.constexpr, KS: tl.constexpr, SELU: tl.constexpr,
                                  HAS_BIAS: tl.constexpr, FLAT: tl.constexpr, PREC: tl.constexpr,
                                  BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
                                  BORDER: tl.constexpr):
        _small_conv_fwd_program(x_ptr, x_sb, x_sc, x_sy, x_sx, w_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                P, H, W, PT, PL, HD, WD, o2_ptr, o2_sb, o2_sc, o2_sy, o2_sx, H0, CI, CO, KS, SELU,
                                HAS_BIAS, FLAT, PREC, BLOCK_P, BLOCK_K, BLOCK_N, BORDER, True)

    @triton.jit
    def _small_conv_fwd_program(x_ptr, x_sb, x_sc, x_sy, x_sx, w_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                P, H, W, PT, PL, HD, WD, o2_ptr, o2_sb, o2_sc, o2_sy, o2_sx, H0,
                                CI: tl.constexpr, CO: tl.constexpr, KS: tl.constexpr, SELU: tl.constexpr,
                                HAS_BIAS: tl.constexpr, FLAT: tl.constexpr, PREC: tl.constexpr,
                                BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
                                BORDER: tl.constexpr, HAS_O2: tl.constexpr):
        """The forward kernels' program. HAS_O2: the result stored a second time, at o2 (the x half of a ConvLSTM's
        [x, h] buffer, ``ops.encoder_xh``), whose next CO channels get zeros in its first H0 images (h_{-1})."""
        if BORDER:
            pmask, b, oy, ox = _pixels(tl.program_id(0) * BLOCK_P, P, HD * WD, WD, BLOCK_P)
            y, x = oy - PT, ox - PL
            inside = (y >= 0) & (y < H) & (x >= 0) & (x < W)
            omask = pmask
            pmask = pmask & inside
        else:
            pmask, b, y, x = _pixels(tl.program_id(0) * BLOCK_P, P, H * W, W, BLOCK_P)
            oy, ox, omask = y, x, pmask
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = n < CO
        acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
        if FLAT:
            k = tl.arange(0, BLOCK_K)
            a = _flat_patches((x_ptr + b * x_sb)[:, None], x_sc, x_sy, x_sx, pmask, y, x, k, H, W, CI, KS)
            w = tl.load(w_ptr + k[:, None] * CO + n[None, :], mask=(k < KS * KS * CI)[:, None] & nmask[None, :],
                        other=0.0)
            acc = tl.dot(a, w, acc, input_precision=PREC)
        else:
            for tap in tl.static_range(KS * KS):
                for c0 in tl.static_range(0, CI, BLOCK_K):
                    ci = c0 + tl.arange(0, BLOCK_K)
                    a = _tap_patches(x_ptr + b * x_sb, x_sc, x_sy, x_sx, pmask, y, x, tap // KS - KS // 2,
                                     tap % KS - KS // 2, ci, H, W, CI)
                    w = tl.load(w_ptr + (tap * CI + ci)[:, None] * CO + n[None, :],
                                mask=(ci < CI)[:, None] & nmask[None, :], other=0.0)
                    acc = tl.dot(a, w, acc, input_precision=PREC)
        if HAS_BIAS:
            acc += tl.load(b_ptr + n, mask=nmask, other=0.0).to(tl.float32)[None, :]
        if SELU:
            acc = selu_of(acc)
        if BORDER:
            acc = tl.where(inside[:, None], acc, 0.0)
        out = o_ptr + b[:, None] * o_sb + n[None, :] * o_sc + oy[:, None] * o_sy + ox[:, None] * o_sx
        if HAS_O2:
            acc = acc.to(o_ptr.dtype.element_ty)
            tl.store(out, acc, mask=omask[:, None] & nmask[None, :])
            o2 = o2_ptr + b[:, None] * o2_sb + n[None, :] * o2_sc + oy[:, None] * o2_sy + ox[:, None] * o2_sx
            tl.store(o2, acc, mask=omask[:, None] & nmask[None, :])
            tl.store(o2 + CO * o2_sc, tl.zeros_like(acc), mask=(omask & (b < H0))[:, None] & nmask[None, :])
        else:
            tl.store(out, acc.to(o_ptr.dtype.element_ty), mask=omask[:, None] & nmask[None, :])

    @triton.jit(do_not_specialize=["H", "W", "TX", "TPI", "TILES", "PROGRAMS"])
    def _small_conv_wgrad_kernel(x_ptr, x_sb, x_sc, x_sy, x_sx, g_ptr, g_sb, g_sc, g_sy, g_sx,
                                 g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx, o_ptr, o_sb, o_sc, o_sy, o_sx, dw_ptr, db_ptr,
                                 H, W, TX, TPI, TILES, PROGRAMS, CI: tl.constexpr, CO: tl.constexpr,
                                 KS: tl.constexpr, SELU: tl.constexpr, FLAT: tl.constexpr, PREC: tl.constexpr,
                                 ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr,
                                 BLOCK_N: tl.constexpr, HAS_G2: tl.constexpr, TAPS_IN_N: tl.constexpr):
        _small_conv_wgrad_program(x_ptr, x_sb, x_sc, x_sy, x_sx, g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc,
                                  g2_sy, g2_sx, o_ptr, o_sb, o_sc, o_sy, o_sx, dw_ptr, db_ptr, H, W, TX, TPI, TILES,
                                  PROGRAMS, CI, CO, KS, SELU, FLAT, PREC, ROWS, COLS, BLOCK_K, BLOCK_N, HAS_G2,
                                  TAPS_IN_N, False)

    # The same storing the flipped kernel's taps (``small_deconv``): a kernel of its own, so that the first one keeps
    # its arguments and its sm_90 code (benchmarks/results/sm90_line_shift/: the same instructions and registers as
    # before the change).
    @triton.jit(do_not_specialize=["H", "W", "TX", "TPI", "TILES", "PROGRAMS"])
    def _small_conv_wgrad_reversed_kernel(x_ptr, x_sb, x_sc, x_sy, x_sx, g_ptr, g_sb, g_sc, g_sy, g_sx,
                                          g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx, o_ptr, o_sb, o_sc, o_sy, o_sx, dw_ptr,
                                          db_ptr, H, W, TX, TPI, TILES, PROGRAMS, CI: tl.constexpr, CO: tl.constexpr,
                                          KS: tl.constexpr, SELU: tl.constexpr, FLAT: tl.constexpr,
                                          PREC: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr,
                                          BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, HAS_G2: tl.constexpr,
                                          TAPS_IN_N: tl.constexpr):
        _small_conv_wgrad_program(x_ptr, x_sb, x_sc, x_sy, x_sx, g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc,
                                  g2_sy, g2_sx, o_ptr, o_sb, o_sc, o_sy, o_sx, dw_ptr, db_ptr, H, W, TX, TPI, TILES,
                                  PROGRAMS, CI, CO, KS, SELU, FLAT, PREC, ROWS, COLS, BLOCK_K, BLOCK_N, HAS_G2,
                                  TAPS_IN_N, True)

    @triton.jit
    def _small_conv_wgrad_program(x_ptr, x_sb, x_sc, x_sy, x_sx, g_ptr, g_sb, g_sc, g_sy, g_sx,
                                  g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx, o_ptr, o_sb, o_sc, o_sy, o_sx, dw_ptr, db_ptr,
                                  H, W, TX, TPI, TILES, PROGRAMS, CI: tl.constexpr, CO: tl.constexpr,
                                  KS: tl.constexpr, SELU: tl.constexpr, FLAT: tl.constexpr, PREC: tl.constexpr,
                                  ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr,
                                  BLOCK_N: tl.constexpr, HAS_G2: tl.constexpr, TAPS_IN_N: tl.constexpr,
                                  REVERSE_TAPS: tl.constexpr):
        """The weight-gradient kernels' program. dW (K, Co) += patches^T @ dz over this program's pixel tiles
        (every PROGRAMS-th of TILES, each ROWS x COLS pixels of one image, ``_tile_pixels``). Grid axis 1: FLAT,
        one block of all taps; else a (tap, channel block) a program (dz re-read per tap: few output channels, dz
        small). The programs of axis-1 index 0 also sum dz into the bias gradient: FLAT with a spare row (K < BLOCK_K),
        as row K of the same product, the patches' column K set to 1 (no reduction of its
        own; it then sums dz as the product reads it, in the patches' dtype -- bf16 for the model's conv1 -- with
        float32 accumulation); else element-wise over the tiles and reduced once at the end
        (a reduction per tile costs a shared-memory round trip and barriers every iteration). Relaxed atomics: the
        sums need no ordering, only atomicity.

        TAPS_IN_N (not FLAT; KS*KS*CO <= BLOCK_N): the product's columns are (tap, output channel) pairs, its rows
        the input channels of block j; x is read once at each pixel p and dz gathered at p - offset(tap) (zero
        outside the image); the bias gradient is the centre tap's columns (dz unshifted), summed beside.
        REVERSE_TAPS (TAPS_IN_N only): tap t's sums stored as tap k*k - 1 - t's, the flipped kernel's
        (``small_deconv``: the gradient of a transposed convolution's own weight)."""
        j = tl.program_id(1)
        BLOCK_P: tl.constexpr = ROWS * COLS
        K: tl.constexpr = KS * KS * CI
        ONES_ROW: tl.constexpr = FLAT and K < BLOCK_K
        if TAPS_IN_N:
            ci = j * BLOCK_K + tl.arange(0, BLOCK_K)
            kmask = ci < CI
            n = tl.arange(0, BLOCK_N)
            nmask = n < KS * KS * CO
            ntap = n // CO
            co = n % CO
            ndy = ntap // KS - KS // 2
            ndx = ntap % KS - KS // 2
            acc = tl.zeros([BLOCK_K, BLOCK_N], dtype=tl.float32)
            colsum = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
            for t in range(tl.program_id(0), TILES, PROGRAMS):
                b, pmask, y, x = _tile_pixels(t, H, W, TX, TPI, ROWS, COLS)
                a = _tap_patches(x_ptr + b * x_sb, x_sc, x_sy, x_sx, pmask, y, x, 0, 0, ci, H, W, CI)
                gy = y[:, None] - ndy[None, :]
                gx = x[:, None] - ndx[None, :]
                m = pmask[:, None] & nmask[None, :] & (gy >= 0) & (gy < H) & (gx >= 0) & (gx < W)
                g = tl.load(g_ptr + b * g_sb + co[None, :] * g_sc + gy * g_sy + gx * g_sx,
                            mask=m, other=0.0).to(tl.float32)
                if HAS_G2:
                    g += tl.load(g2_ptr + b * g2_sb + co[None, :] * g2_sc + gy * g2_sy + gx * g2_sx,
                                 mask=m, other=0.0).to(tl.float32)
                if SELU:
                    o = tl.load(o_ptr + b * o_sb + co[None, :] * o_sc + gy * o_sy + gx * o_sx,
                                mask=m, other=0.0).to(tl.float32)
                    g = g * tl.where(o > 0, _SCALE, o + _SCALE_ALPHA)
                if j == 0:
                    colsum += g
                acc = tl.dot(tl.trans(a), g.to(a.dtype), acc, input_precision=PREC)
            stored_tap = (KS * KS - 1 - ntap) if REVERSE_TAPS else ntap
            tl.atomic_add(dw_ptr + (stored_tap[None, :] * CI + ci[:, None]) * CO + co[None, :], acc,
                          mask=kmask[:, None] & nmask[None, :], sem="relaxed")
            if j == 0:
                tl.atomic_add(db_ptr + co, tl.sum(colsum, axis=0), mask=nmask & (ntap == KS * KS // 2),
                              sem="relaxed")
            return
        if FLAT:
            # What does not change from tile to tile is computed once: each pixel's offset within its tile, each
            # tap's shift, and so the gather's offsets and the maps' (int32), leaving a tile a base address and four
            # compares an element (sm_90: 620 loop instructions a thread against 1,615). conv1's call is no faster
            # for it (~62 us, results/small_conv_tiles2/; its time is not set by its instructions,
            # docs/kernel-experiments.md), but the tile walk without it ran that call ~6 us slower
            # (results/small_conv_tiles/).
            k = tl.arange(0, BLOCK_K)
            kmask = k < K
            n = tl.arange(0, BLOCK_N)
            nmask = n < CO
            i = tl.arange(0, BLOCK_P)
            ty = i // COLS
            tx = i % COLS
            tap = k // CI
            kdy = tap // KS - KS // 2
            kdx = tap % KS - KS // 2
            gy = ty[:, None] + tl.where(kmask, kdy, H)[None, :]  # k >= K: below every image, never read
            gx = tx[:, None] + kdx[None, :]
            a_off = gy * x_sy + gx * x_sx + (k % CI)[None, :] * x_sc
            g_off = ty[:, None] * g_sy + tx[:, None] * g_sx + n[None, :] * g_sc
            g2_off = ty[:, None] * g2_sy + tx[:, None] * g2_sx + n[None, :] * g2_sc
            o_off = ty[:, None] * o_sy + tx[:, None] * o_sx + n[None, :] * o_sc
            acc = tl.zeros([BLOCK_K, BLOCK_N], dtype=tl.float32)
            colsum = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
            for t in range(tl.program_id(0), TILES, PROGRAMS):
                b, y0, x0 = _tile_origin(t, TX, TPI, ROWS, COLS)
                m = ((ty < H - y0) & (tx < W - x0))[:, None] & nmask[None, :]
                # The two gradients summed in their own dtype, as autograd sums them (bf16: one packed add for two),
                # SELU's derivative in float32, as PyTorch's elu_backward computes it.
                g = tl.load(g_ptr + (b * g_sb + y0 * g_sy + x0 * g_sx) + g_off, mask=m, other=0.0)
                if HAS_G2:
                    g += tl.load(g2_ptr + (b * g2_sb + y0 * g2_sy + x0 * g2_sx) + g2_off, mask=m, other=0.0)
                g = g.to(tl.float32)
                if SELU:
                    o = tl.load(o_ptr + (b * o_sb + y0 * o_sy + x0 * o_sx) + o_off, mask=m,
                                other=0.0).to(tl.float32)
                    g = g * tl.where(o > 0, _SCALE, o + _SCALE_ALPHA)
                # Pixels outside the image gather the image's own values (every address stays in it) against dz
                # rows of zeros.
                am = (gy >= -y0) & (gy < H - y0) & (gx >= -x0) & (gx < W - x0)
                a = tl.load(x_ptr + (b * x_sb + y0 * x_sy + x0 * x_sx) + a_off, mask=am, other=0.0)
                if ONES_ROW:
                    a = tl.where((k == K)[None, :], 1.0, a).to(a.dtype)
                elif j == 0:
                    colsum += g
                acc = tl.dot(tl.trans(a), g.to(a.dtype), acc, input_precision=PREC)
            tl.atomic_add(dw_ptr + k[:, None] * CO + n[None, :], acc, mask=kmask[:, None] & nmask[None, :],
                          sem="relaxed")
            if ONES_ROW:
                tl.atomic_add(db_ptr + n[None, :] + 0 * k[:, None], acc, mask=(k == K)[:, None] & nmask[None, :],
                              sem="relaxed")
            elif j == 0:
                tl.atomic_add(db_ptr + n, tl.sum(colsum, axis=0), mask=nmask, sem="relaxed")
            return
        NCB: tl.constexpr = (CI + BLOCK_K - 1) // BLOCK_K
        tap = j // NCB
        ci = (j % NCB) * BLOCK_K + tl.arange(0, BLOCK_K)
        k = tap * CI + ci
        kmask = ci < CI
        n = tl.arange(0, BLOCK_N)
        nmask = n < CO
        acc = tl.zeros([BLOCK_K, BLOCK_N], dtype=tl.float32)
        colsum = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
        for t in range(tl.program_id(0), TILES, PROGRAMS):
            b, pmask, y, x = _tile_pixels(t, H, W, TX, TPI, ROWS, COLS)
            m = pmask[:, None] & nmask[None, :]
            g = tl.load(g_ptr + b * g_sb + n[None, :] * g_sc + y[:, None] * g_sy + x[:, None] * g_sx,
                        mask=m, other=0.0).to(tl.float32)
            if HAS_G2:  # the output's second gradient (its other consumer's), summed here
                g += tl.load(g2_ptr + b * g2_sb + n[None, :] * g2_sc + y[:, None] * g2_sy + x[:, None] * g2_sx,
                             mask=m, other=0.0).to(tl.float32)
            if SELU:
                o = tl.load(o_ptr + b * o_sb + n[None, :] * o_sc + y[:, None] * o_sy + x[:, None] * o_sx,
                            mask=m, other=0.0).to(tl.float32)
                g = g * tl.where(o > 0, _SCALE, o + _SCALE_ALPHA)
            a = _tap_patches(x_ptr + b * x_sb, x_sc, x_sy, x_sx, pmask, y, x, tap // KS - KS // 2,
                             tap % KS - KS // 2, ci, H, W, CI)
            if j == 0:
                colsum += g
            acc = tl.dot(tl.trans(a), g.to(a.dtype), acc, input_precision=PREC)
        tl.atomic_add(dw_ptr + k[:, None] * CO + n[None, :], acc, mask=kmask[:, None] & nmask[None, :],
                      sem="relaxed")
        if j == 0:
            tl.atomic_add(db_ptr + n, tl.sum(colsum, axis=0), mask=nmask, sem="relaxed")


def _precision(dtype: torch.dtype) -> str:
    """The dot precision for ``dtype`` (bf16 / fp16 dots ignore it). float32 keeps float32 accuracy, as cuDNN gives
    these layers (it has no TF32 tensor-core kernel for 3 channels): three TF32 products per product ("tf32x3", error
    ~2^-22 of each product). Plain TF32 moved the whole fused float32 model's first loss from 2e-5 to 3e-4 of the
    reference's on the H200; exact FMA dots ("ieee") scored 35,433 windows/s against tf32x3's 80,986
    (results/ablations/). The model routes float32 to cuDNN anyway (``suits``)."""
    return "tf32x3" if dtype == torch.float32 else "tf32"


def _blocking(ci: int, ks: int) -> tuple[bool, int, int]:
    """(FLAT, BLOCK_K, blocks along the weight-gradient grid's axis 1) for ``ci`` input channels, ``ks`` x ``ks``
    taps: all taps in one block when they fit in 64, else per tap in channel blocks of up to 64."""
    K = ks * ks * ci
    if K <= 64:
        return True, max(16, triton.next_power_of_2(K)), 1
    block = max(16, min(64, triton.next_power_of_2(ci)))
    return False, block, ks * ks * triton.cdiv(ci, block)


# Shared memory the taps-in-N kernel may ask for: Triton stages its x and dz tiles through shared memory (3 stages by
# default on sm_90); float32 at 256 pixels asked for 256-320 KB, over the H200's 227 KB (results/small_conv_confirm/).
GATHER_SHARED_BYTES = 160 * 1024


def _fitting_block_p(block_p: int, block_k: int, block_n: int, itemsize: int) -> int:
    """``block_p`` halved until three stages of the (pixels x channels) x tile and the (pixels x columns) dz tile
    fit in GATHER_SHARED_BYTES (bf16 at the default 256 x (64 + 32) fits; float32 takes 128)."""
    while block_p > 16 and 3 * block_p * (block_k + block_n) * itemsize > GATHER_SHARED_BYTES:
        block_p //= 2
    return block_p


def taps_in_n(ci: int, co: int, ks: int) -> bool:
    """Whether the weight gradient takes the taps-in-N form: not flat (many input channels) and all taps of all
    output channels in one column block (deconv1: 9 x 3 = 27 of 32). MSCRED_SMALL_CONV_WGRAD_GATHER=0 never."""
    return (ks * ks * ci > 64 and ks * ks * co <= MAX_BLOCK_N
            and not _runtime.switched_off("MSCRED_SMALL_CONV_WGRAD_GATHER"))


def _block_n(C: int) -> int:
    return max(16, min(MAX_BLOCK_N, triton.next_power_of_2(C)))


def _as_matrix(weight: torch.Tensor) -> torch.Tensor:
    """(Co, Ci, k, k) -> the (K, Co) matrix the kernels read, row (ky * k + kx) * Ci + ci."""
    co, ci, k, _ = weight.shape
    return weight.permute(2, 3, 1, 0).reshape(k * k * ci, co).contiguous()


def _forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], selu: bool,
             pads: tuple[int, int, int, int] = (0, 0, 0, 0), h0_images: Optional[int] = None):
    """The forward kernel: a new channels-last (N, Co, H, W) output, inside a zero border ``pads`` (top, bottom,
    left, right) that the kernel writes too. With ``h0_images``: (out, xh), xh a new [x, h] buffer
    (``ops.encoder_xh.new_buffer``) whose x half the kernel fills with out's values as well and whose h half it
    zeroes in the first ``h0_images`` images."""
    N, CI, H, W = x.shape
    CO, KS = weight.shape[0], weight.shape[-1]
    if small_conv_taps.suits(CI, CO, KS):  # many inputs, few outputs (deconv1): the input read once
        if h0_images is not None:
            raise ValueError("small_conv: the taps-beside-the-channels forward writes no [x, h] buffer")
        return small_conv_taps.forward(x, weight, bias, selu, pads, _precision(x.dtype))
    HD, WD = H + pads[0] + pads[1], W + pads[2] + pads[3]
    out = torch.empty(N, CO, HD, WD, device=x.device, dtype=x.dtype, memory_format=torch.channels_last)
    xh = None if h0_images is None else encoder_xh.new_buffer(out)
    P = N * HD * WD
    if P and CO:
        tile = fwd_constants(CI, CO, KS, x.dtype)
        grid = (triton.cdiv(P, tile["BLOCK_P"]), triton.cdiv(CO, tile["BLOCK_N"]))
        args = (x, *x.stride(), _as_matrix(weight), bias if bias is not None else out, out, *out.stride(), P, H, W,
                pads[0], pads[2], HD, WD)
        kernel, extra = (_small_conv_fwd_kernel, ()) if xh is None else \
            (_small_conv_fwd_xh_kernel, (xh, *xh.stride(), h0_images))
        kernel[grid](*args, *extra, SELU=selu, HAS_BIAS=bias is not None, BORDER=any(pads), num_warps=FWD_WARPS,
                     **tile)
    return out if xh is None else (out, xh)


def fwd_constants(ci: int, co: int, ks: int, dtype: torch.dtype) -> dict:
    """The forward kernel's constexpr arguments for ci -> co channels and a ks x ks kernel in ``dtype``, but SELU,
    HAS_BIAS and BORDER (the call's); launched with FWD_WARPS."""
    flat, block_k, _ = _blocking(ci, ks)
    return dict(CI=ci, CO=co, KS=ks, FLAT=flat, PREC=_precision(dtype), BLOCK_P=FWD_BLOCK_P, BLOCK_K=block_k,
                BLOCK_N=_block_n(co))


def wgrad_tile_shape(block_p: int, width: int) -> tuple[int, int]:
    """(ROWS, COLS) of a weight-gradient tile of ``block_p`` pixels on maps ``width`` wide: COLS the power of two
    covering the width (at most ``block_p``), ROWS what is left; one image a tile (``_tile_pixels``)."""
    cols = min(block_p, triton.next_power_of_2(max(1, width)))
    return block_p // cols, cols


def wgrad_launch(ci: int, co: int, ks: int, dtype: torch.dtype, width: int) -> tuple[dict, int, int, int]:
    """(constexpr arguments but SELU and HAS_G2, warps, programs per SM, blocks along K) of the weight-gradient
    kernel for ci -> co channels and a ks x ks kernel in ``dtype`` on maps ``width`` wide: the taps-in-N form where
    ``taps_in_n`` (its tile MSCRED_SMALL_CONV_WGRAD_GATHER_TILE, halved to fit the shared memory), else per tap or
    flat (MSCRED_SMALL_CONV_WGRAD_TILE)."""
    flat, block_k, kblocks = _blocking(ci, ks)
    gather = taps_in_n(ci, co, ks)
    if gather:
        kblocks, block_n = triton.cdiv(ci, block_k), _block_n(ks * ks * co)
        block_p, warps, per_sm = _runtime.tile_override(
            "MSCRED_SMALL_CONV_WGRAD_GATHER_TILE", (GATHER_BLOCK_P, GATHER_WARPS, GATHER_PROGRAMS_PER_SM))
        block_p = _fitting_block_p(block_p, block_k, block_n, dtype.itemsize)
    else:
        block_n = _block_n(co)
        block_p, warps, per_sm = _runtime.tile_override(
            "MSCRED_SMALL_CONV_WGRAD_TILE", (WGRAD_BLOCK_P, WGRAD_WARPS, WGRAD_PROGRAMS_PER_SM))
    rows, cols = wgrad_tile_shape(block_p, width)
    constants = dict(CI=ci, CO=co, KS=ks, FLAT=flat, PREC=_precision(dtype), ROWS=rows, COLS=cols,
                     BLOCK_K=block_k, BLOCK_N=block_n, TAPS_IN_N=gather)
    return constants, warps, per_sm, kblocks


@torch.library.custom_op("mscred::small_conv_fused", mutates_args=())
def small_conv_fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, selu: bool,
                     pads: list[int]) -> torch.Tensor:
    """Fused forward (see ``conv_act``; ``pads`` its out_pads): x and weight of one dtype, bias contiguous (float32
    under autocast)."""
    return _forward(x, weight, bias, selu, tuple(pads))


@small_conv_fused.register_fake
def _(x, weight, bias, selu, pads):
    return _fused_like(x, weight, pads)


def _fused_like(x: torch.Tensor, weight: torch.Tensor, pads: list[int]) -> torch.Tensor:
    return torch.empty(x.shape[0], weight.shape[0], x.shape[2] + pads[0] + pads[1], x.shape[3] + pads[2] + pads[3],
                       device=x.device, dtype=x.dtype, memory_format=torch.channels_last)


@torch.library.custom_op("mscred::small_conv_fused_xh", mutates_args=())
def small_conv_fused_xh(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, selu: bool, pads: list[int],
                        h0_images: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, xh): ``small_conv_fused``'s out, and a new [x, h] buffer (``ops.encoder_xh``) whose x half holds out's
    values too (border included) and whose h half is zero in its first ``h0_images`` images; one kernel."""
    return _forward(x, weight, bias, selu, tuple(pads), h0_images)


@small_conv_fused_xh.register_fake
def _(x, weight, bias, selu, pads, h0_images):
    out = _fused_like(x, weight, pads)
    return out, encoder_xh.new_buffer(out)


@torch.library.custom_op("mscred::small_conv_fused_backward", mutates_args=())
def small_conv_fused_backward(dout: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                              selu: bool, need_dx: bool, dout2: Optional[torch.Tensor] = None
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of ``small_conv_fused``; dx is (0,) when not ``need_dx``. dweight in weight's dtype,
    dbias in float32 (the caller casts it to the bias's dtype). ``out`` is the forward's output (read for SELU).
    ``dout2``: a second gradient of the output (its other consumer's, ``conv_act_shared``), summed in the weight
    gradient's kernel (and added before the data gradient, which the shared layer, conv1, does not need)."""
    CI, CO, KS = x.shape[1], weight.shape[0], weight.shape[-1]
    dout = dout.to(x.dtype)
    dw, db, _ = weight_grad(dout, x, out, selu, CO, KS, None if dout2 is None else dout2.to(x.dtype))
    # One strided cast-and-copy into the weight's layout (.to(...).contiguous() launched two: the cast kept the
    # permuted strides, then the copy). The weight's own layout: channels-last for the training step's cast cache,
    # whose backward then reads it in place (NCHW had cost it a copy, 2.0 us at the step's tail in
    # results/next_1206/timeline/).
    dweight = torch.empty_like(weight)
    dweight.copy_(dw.view(KS, KS, CI, CO).permute(3, 2, 0, 1))
    if not need_dx:
        return x.new_empty(0), dweight, db
    if dout2 is not None:
        dout = dout + dout2.to(x.dtype)
    # The adjoint of a stride-1 convolution with symmetric padding: the same convolution of dz with the kernel
    # transposed (in <-> out channels) and flipped, which is what deconv_as_conv computes.
    dx = _forward(act_grad(dout, out, selu), deconv_as_conv(weight), None, False)
    return dx, dweight, db


def weight_grad(dout: torch.Tensor, x: torch.Tensor, out: torch.Tensor, selu: bool, CO: int, KS: int,
                dout2: Optional[torch.Tensor] = None, reverse_taps: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(dW as the (KS*KS*Ci, Co) float32 matrix, row (ky * KS + kx) * Ci + ci; the bias gradient, float32; whether
    the taps came reversed) of the convolution x -> out for dout (and dout2, a second gradient summed in), dout in
    x's dtype. ``reverse_taps``: row tap t holds the kernel's tap KS*KS - 1 - t (the flipped kernel's), where the
    taps-in-N kernel runs (the third value says whether it did)."""
    N, CI, H, W = x.shape
    K, P = KS * KS * CI, N * H * W
    g2 = dout if dout2 is None else dout2  # (dout stands in when there is none: HAS_G2 off)
    dw = torch.zeros(K, CO, device=x.device, dtype=torch.float32)
    db = torch.zeros(CO, device=x.device, dtype=torch.float32)
    tile, warps, per_sm, kblocks = wgrad_launch(CI, CO, KS, x.dtype, W)
    reversed_here = reverse_taps and tile["TAPS_IN_N"]
    if P:
        tiles_x = triton.cdiv(W, tile["COLS"])
        per_image = triton.cdiv(H, tile["ROWS"]) * tiles_x
        sms = 4 if _interpreting() else _runtime.sm_count(x.device)
        programs = max(1, min(N * per_image, per_sm * sms // kblocks + 1))
        grid = (programs, kblocks)
        kernel = _small_conv_wgrad_reversed_kernel if reversed_here else _small_conv_wgrad_kernel
        kernel[grid](x, *x.stride(), dout, *dout.stride(), g2, *g2.stride(), out, *out.stride(), dw, db, H, W,
                     tiles_x, per_image, N * per_image, programs, SELU=selu, HAS_G2=dout2 is not None,
                     num_warps=warps, **tile)
    return dw, db, reversed_here


def act_grad(dout: torch.Tensor, out: torch.Tensor, selu: bool) -> torch.Tensor:
    """dz = dout * act'(out) in dout's dtype, as the weight-gradient kernel forms it (SELU's derivative from the
    output, in float32)."""
    if not selu:
        return dout
    o = out.float()
    return (dout.float() * torch.where(o > 0, SELU_SCALE, o + SELU_SCALE * SELU_ALPHA)).to(dout.dtype)


@small_conv_fused_backward.register_fake
def _(dout, x, weight, out, selu, need_dx, dout2=None):
    dx = torch.empty_like(x, memory_format=torch.channels_last) if need_dx else x.new_empty(0)
    return dx, torch.empty_like(weight), torch.empty(weight.shape[0], device=x.device, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, weight, bias, selu, pads = inputs
    ctx.save_for_backward(x, weight, output)
    ctx.selu, ctx.bias_dtype, ctx.pads = selu, bias.dtype, tuple(pads)


def _backward(ctx, dout):
    x, weight, out = ctx.saved_tensors
    need_dx = ctx.needs_input_grad[0]
    # A bordered output's border is constant zero: only its interior's gradient reaches x, the weight and the bias.
    dx, dweight, db = small_conv_fused_backward(interior(dout, ctx.pads), x, weight, interior(out, ctx.pads),
                                                ctx.selu, need_dx)
    return (dx if need_dx else None), dweight, db.to(ctx.bias_dtype), None, None


small_conv_fused.register_autograd(_backward, setup_context=_setup_context)
