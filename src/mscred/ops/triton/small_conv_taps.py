"""The small-channel convolution's forward for many input and few output channels (deconv1: 64 -> 3, 3 x 3), with
the taps beside the output channels: two kernels, the input read once.

    y[p, t * Co + co] = sum_ci x[p, ci] * weight[co, ci, ky_t, kx_t]       a GEMM over input pixels p: (P, Ci) x
                                                                           (Ci, k*k*Co), float32 out
    out[q, co] = act(bias[co] + sum_t y[q + offset(t), t * Co + co])       per output pixel, the taps' partial
                                                                           sums gathered from the neighbours

The generic forward (``small_conv._small_conv_fwd_kernel``) gathers the input at each of the k*k taps (a (pixels,
Ci) tile nine times a tile) for a product only Co = 3 columns wide: deconv1's call in the bf16 training step took
31.3 us (``results/graph_timeline_shapes/``), ~8x its bytes (``docs/kernel-experiments.md``, the tile sweeps of
2026-11-30). Here the input is read once, row by row as it lies, and the partial sums (float32: the nine taps are
summed in float32, as the generic kernel's accumulator does, before the one rounding to the output's dtype) go
through memory, 4 bytes a column, k*k*Co columns padded to a power of two; their gather is 9 small reads a pixel,
mostly from L2. The partial sums take as much memory as the bf16 input (128 bytes a pixel: 32 float32 columns
against 64 bf16 channels; 118 MB at the CUDA scoring batch of 1,024 windows of 30 sensors), held for the call only.
The weight-gradient's taps-in-N form (``small_conv``) is the same idea on the other side.

``forward(x, weight, bias, selu, pads, precision)``: as ``small_conv._forward`` (a channels-last output inside a
zero border ``pads``, which the second kernel writes too). ``suits(ci, co, ks)`` says when it is used.
"""
from __future__ import annotations

from typing import Optional

import torch

from mscred.ops.triton import runtime as _runtime
from mscred.ops.triton.runtime import tl, triton

MAX_COLUMNS = 64  # k*k*Co the partial-sum rows may hold (padded to a power of two)
GEMM_BLOCK_P, GEMM_WARPS = 128, 4  # input pixels a program of the GEMM
SUM_BLOCK_P, SUM_WARPS = 256, 4    # output pixels a program of the gather


def suits(ci: int, co: int, ks: int) -> bool:
    """Whether the taps-in-N forward takes a ci -> co, ks x ks layer: too many taps x channels for one flat block
    (``small_conv._blocking``: > 64) and all taps of all output channels in one row of partial sums.
    MSCRED_SMALL_CONV_FWD_TAPS=0: never (A/B runs)."""
    return (ks * ks * ci > 64 and ks * ks * co <= MAX_COLUMNS
            and not _runtime.switched_off("MSCRED_SMALL_CONV_FWD_TAPS"))


def weight_columns(weight: torch.Tensor) -> torch.Tensor:
    """(Co, Ci, k, k) -> the (Ci, k*k*Co) matrix of the GEMM, column (ky * k + kx) * Co + co."""
    co, ci, k, _ = weight.shape
    return weight.permute(1, 2, 3, 0).reshape(ci, k * k * co).contiguous()


def transposed_weight_columns(weight: torch.Tensor) -> torch.Tensor:
    """A stride-1 transposed convolution's weight (Ci, Co, k, k) -> the (Ci, k*k*Co) matrix, column
    (ky * k + kx) * Co + co: its channels-last memory as it lies (a view where it is channels-last). As the columns
    of the convolution it equals after the crop (``small_conv.deconv_as_conv``), its taps come reversed; the gather
    kernel reads them so (``TRANSPOSED``)."""
    ci, co, k, _ = weight.shape
    return weight.permute(0, 2, 3, 1).reshape(ci, k * k * co).contiguous()


def forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], selu: bool,
            pads: tuple[int, int, int, int], precision: str, transposed: bool = False) -> torch.Tensor:
    """``transposed``: ``weight`` is a stride-1 transposed convolution's (Ci, Co, k, k), the layer computed being
    the convolution with ``small_conv.deconv_as_conv(weight)``, without that flipped copy of the weight."""
    N, CI, H, W = x.shape
    CO, KS = (weight.shape[1] if transposed else weight.shape[0]), weight.shape[-1]
    HD, WD = H + pads[0] + pads[1], W + pads[2] + pads[3]
    out = torch.empty(N, CO, HD, WD, device=x.device, dtype=x.dtype, memory_format=torch.channels_last)
    if N * HD * WD == 0 or CO == 0:
        return out
    columns = max(16, triton.next_power_of_2(KS * KS * CO))  # (tl.dot's smallest N)
    partial = torch.empty(N * H * W, columns, device=x.device, dtype=torch.float32)
    block_k = max(16, min(64, triton.next_power_of_2(CI)))
    _taps_gemm_kernel[(triton.cdiv(N * H * W, GEMM_BLOCK_P),)](
        x, *x.stride(), (transposed_weight_columns if transposed else weight_columns)(weight), partial, N * H * W,
        H * W, W, CI=CI, NT=KS * KS * CO,
        COLUMNS=columns, PREC=precision, BLOCK_P=GEMM_BLOCK_P, BLOCK_K=block_k, num_warps=GEMM_WARPS)
    (_taps_sum_transposed_kernel if transposed else _taps_sum_kernel)[(triton.cdiv(N * HD * WD, SUM_BLOCK_P),)](
        partial, bias if bias is not None else partial, out, *out.stride(), N * HD * WD, H, W, pads[0],
        pads[2], HD, WD, CO=CO, CO_PAD=triton.next_power_of_2(CO), KS=KS, COLUMNS=columns, SELU=selu,
        HAS_BIAS=bias is not None, BLOCK_P=SUM_BLOCK_P, num_warps=SUM_WARPS)
    return out


if triton is not None:
    from mscred.ops.triton.bias_act import selu_of  # (a jit helper: defined only with Triton)

    @triton.jit(do_not_specialize=["P", "HW", "W"])
    def _taps_gemm_kernel(x_ptr, x_sb, x_sc, x_sy, x_sx, w_ptr, y_ptr, P, HW, W, CI: tl.constexpr,
                          NT: tl.constexpr, COLUMNS: tl.constexpr, PREC: tl.constexpr, BLOCK_P: tl.constexpr,
                          BLOCK_K: tl.constexpr):
        """y[p, :NT] for BLOCK_P input pixels p (the flat N*H*W index): their channel rows (contiguous when x is
        channels-last) against the (CI, NT) weight columns, in blocks of BLOCK_K channels."""
        p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
        pmask = p < P
        r = p % HW
        row = x_ptr + (p // HW).to(tl.int64) * x_sb + (r // W) * x_sy + (r % W) * x_sx
        n = tl.arange(0, COLUMNS)
        acc = tl.zeros([BLOCK_P, COLUMNS], dtype=tl.float32)
        for c0 in tl.static_range(0, CI, BLOCK_K):
            ci = c0 + tl.arange(0, BLOCK_K)
            a = tl.load(row[:, None] + ci[None, :] * x_sc, mask=pmask[:, None] & (ci < CI)[None, :], other=0.0)
            w = tl.load(w_ptr + ci[:, None] * NT + n[None, :], mask=(ci < CI)[:, None] & (n < NT)[None, :],
                        other=0.0)
            acc = tl.dot(a, w, acc, input_precision=PREC)
        tl.store(y_ptr + p.to(tl.int64)[:, None] * COLUMNS + n[None, :], acc, mask=pmask[:, None])

    @triton.jit(do_not_specialize=["P", "H", "W", "PT", "PL", "HD", "WD"])
    def _taps_sum_kernel(y_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx, P, H, W, PT, PL, HD, WD, CO: tl.constexpr,
                         CO_PAD: tl.constexpr, KS: tl.constexpr, COLUMNS: tl.constexpr, SELU: tl.constexpr,
                         HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr):
        """out for BLOCK_P output pixels of the HD x WD (bordered) output: each tap's Co partial sums read from
        the input pixel it shifts to (zero outside the image: the convolution's padding), summed; bias, SELU;
        zeros on the border."""
        _taps_sum_program(y_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx, P, H, W, PT, PL, HD, WD, CO, CO_PAD, KS,
                          COLUMNS, SELU, HAS_BIAS, BLOCK_P, False)

    # The same for a transposed convolution's taps (``forward(transposed=True)``): a kernel of its own, so that the
    # first one keeps its arguments (its sm_90 code compiled from this tree and the one before, fresh caches: the
    # same 880 instructions and 70 registers).
    @triton.jit(do_not_specialize=["P", "H", "W", "PT", "PL", "HD", "WD"])
    def _taps_sum_transposed_kernel(y_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx, P, H, W, PT, PL, HD, WD,
                                    CO: tl.constexpr, CO_PAD: tl.constexpr, KS: tl.constexpr, COLUMNS: tl.constexpr,
                                    SELU: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr):
        _taps_sum_program(y_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx, P, H, W, PT, PL, HD, WD, CO, CO_PAD, KS,
                          COLUMNS, SELU, HAS_BIAS, BLOCK_P, True)

    @triton.jit
    def _taps_sum_program(y_ptr, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx, P, H, W, PT, PL, HD, WD, CO: tl.constexpr,
                          CO_PAD: tl.constexpr, KS: tl.constexpr, COLUMNS: tl.constexpr, SELU: tl.constexpr,
                          HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, TRANSPOSED: tl.constexpr):
        """The gather kernels' program. TRANSPOSED: the partial sums are a transposed convolution's taps
        (``transposed_weight_columns``), so the convolution's tap t is column k*k - 1 - t (summed in the same
        order: the same bits)."""
        q = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
        omask = q < P
        b = q // (HD * WD)
        r = q % (HD * WD)
        oy, ox = r // WD, r % WD
        y, x = oy - PT, ox - PL
        inside = omask & (y >= 0) & (y < H) & (x >= 0) & (x < W)
        co = tl.arange(0, CO_PAD)
        cmask = co < CO
        acc = tl.zeros([BLOCK_P, CO_PAD], dtype=tl.float32)
        for t in tl.static_range(KS * KS):
            iy = y + (t // KS - KS // 2)
            ix = x + (t % KS - KS // 2)
            valid = inside & (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
            src = ((b * H + iy) * W + ix).to(tl.int64) * COLUMNS + ((KS * KS - 1 - t) if TRANSPOSED else t) * CO
            acc += tl.load(y_ptr + src[:, None] + co[None, :], mask=valid[:, None] & cmask[None, :], other=0.0)
        if HAS_BIAS:
            acc += tl.load(b_ptr + co, mask=cmask, other=0.0).to(tl.float32)[None, :]
        if SELU:
            acc = selu_of(acc)
        acc = tl.where(inside[:, None], acc, 0.0)
        out = o_ptr + b.to(tl.int64)[:, None] * o_sb + co[None, :] * o_sc + oy[:, None] * o_sy + ox[:, None] * o_sx
        tl.store(out, acc.to(o_ptr.dtype.element_ty), mask=omask[:, None] & cmask[None, :])
