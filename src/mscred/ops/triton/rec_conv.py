"""The ConvLSTM's recurrent convolution, forward and data gradient, as Triton "gather GEMMs" (bf16 / fp16).

Per step t >= 2 of a level, the fused ConvLSTM (``convlstm.py``) convolves the zero-bordered previous hidden state
with the recurrent weights, and in the backward takes that convolution's data gradient:

    forward  rec[b, y, x, n]   = sum_{ky, kx, ci} hpad[b, y + ky, x + kx, ci] * W[n, ci, ky, kx]
                                 hpad (B, HP, WP, Ch) zero-bordered, rec (B, H, W, 4Ch)
    dgrad    dh[b, y, x, ci]   = sum_{ky, kx, n} dg[b, y + top - ky, x + left - kx, n] * W[n, ci, ky, kx]
                                 (terms outside the (H, W) image are zero), written into dhpad's interior

Both are one GEMM over the B*H*W pixels of the step with K = k*k*channels: row m of the left operand is the
channel vector of the pixel that tap (ky, kx) of output pixel m reads (channels-last, so a K chunk of one tap is
a contiguous run of 64-256 bytes), and the right operand is the weight packed (k*k*channels, outputs). Nothing is
written but the output: no im2col matrix, no padded copy.

Why: these convolutions are small (3.8-4.3 GFLOP at batch 128) and cuDNN ran them at 60-150 TFLOP/s on the
H200 (0.03-0.07 ms each, 16 forward and 16 data-gradient calls per training step; ``results/conv_layers/``) when
their memory traffic alone would allow ~0.01 ms. ``benchmarks/bench_rec_conv.py`` times both against cuDNN.

float32 and float64 keep cuDNN (``suits``): the model uses this op under bf16 autocast.
"""
from __future__ import annotations

import os

import torch

from mscred.ops.triton.runtime import interpreting as _interpreting
from mscred.ops.triton.runtime import tl, triton

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) per direction, by (outputs, K chunk): chosen on the H200 by
# benchmarks/bench_rec_conv.py (see CONFIGS there); the interpreter takes larger tiles (it pays per program).
_DEFAULT = (128, 128, 64, 8, 3)


def suits(dtype: torch.dtype) -> bool:
    """Whether the recurrent convolutions of a fused ConvLSTM in ``dtype`` run here: bf16 / fp16 (the model's
    autocast dtypes), unless MSCRED_REC_CONV=cudnn (A/B runs). MSCRED_REC_CONV=all also takes float32 (exact
    "ieee" dots; the CPU interpreter's tests). float64 always stays on cuDNN."""
    choice = os.environ.get("MSCRED_REC_CONV", "triton").strip().lower()
    if choice not in ("triton", "cudnn", "all"):
        raise ValueError(f"MSCRED_REC_CONV must be triton, cudnn or all, got {choice!r}")
    if choice == "cudnn" or triton is None or dtype == torch.float64:
        return False
    return dtype in (torch.bfloat16, torch.float16) or choice == "all"


if triton is not None:

    @triton.jit
    def gather_gemm_kernel(
        src_ptr, w_ptr, dst_ptr,
        M, H, W,                      # output pixels (B*H*W) and the image they index
        SH, SW, SY0, SX0,             # source image (rows, columns) and the offset of tap (0, 0) from the pixel
        DH, DW, DY0, DX0,             # destination image and the offset of the pixel in it
        KC: tl.constexpr,             # channels of the source (one tap's K chunk)
        NOUT: tl.constexpr,           # output channels = columns of the packed weight
        KS: tl.constexpr,             # kernel size
        SGN: tl.constexpr,            # +1: tap (ky, kx) reads pixel + (ky, kx); -1: pixel - (ky, kx)
        CHECK: tl.constexpr,          # whether a tap can fall outside the source (then it reads zero)
        PREC: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        m_ok = m < M
        hw = H * W
        b = m // hw
        r = m - b * hw
        y = r // W
        x = r - y * W
        n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        # One loop over all K = KS*KS*KC (a runtime loop, so that Triton pipelines its loads): BLOCK_K divides KC,
        # so a chunk never straddles two taps.
        for k0 in range(0, KS * KS * KC, BLOCK_K):
            tap = k0 // KC
            ky = tap // KS
            kx = tap - ky * KS
            sy = y + SY0 + SGN * ky
            sx = x + SX0 + SGN * kx
            row = (b * SH + sy).to(tl.int64) * SW + sx
            a_ptr = src_ptr + row[:, None] * KC + (k0 - tap * KC + kk)[None, :]
            if CHECK:
                ok = m_ok & (sy >= 0) & (sy < SH) & (sx >= 0) & (sx < SW)
            else:
                ok = m_ok
            a = tl.load(a_ptr, mask=ok[:, None], other=0.0)
            w = tl.load(w_ptr + (k0 + kk)[:, None] * NOUT + n[None, :])
            acc = tl.dot(a, w, acc, input_precision=PREC)
        drow = (b * DH + y + DY0).to(tl.int64) * DW + x + DX0
        tl.store(dst_ptr + drow[:, None] * NOUT + n[None, :], acc.to(dst_ptr.dtype.element_ty),
                 mask=m_ok[:, None] & (n < NOUT)[None, :])


def _nhwc(t: torch.Tensor) -> bool:
    """Whether a (B, C, H, W) tensor is stored channels-last and dense (each pixel's channels contiguous, pixels
    back to back)."""
    B, C, H, W = t.shape
    return t.stride() == (H * W * C, 1, W * C, C) or t.numel() == 0


def pack_forward(w_h: torch.Tensor) -> torch.Tensor:
    """(4Ch, Ch, k, k) recurrent weight -> (k*k*Ch, 4Ch): row (ky*k + kx)*Ch + ci."""
    return w_h.permute(2, 3, 1, 0).reshape(-1, w_h.shape[0]).contiguous()


def pack_dgrad(w_h: torch.Tensor) -> torch.Tensor:
    """(4Ch, Ch, k, k) recurrent weight -> (k*k*4Ch, Ch): row (ky*k + kx)*4Ch + n."""
    return w_h.permute(2, 3, 0, 1).reshape(-1, w_h.shape[1]).contiguous()


def _precision(dtype: torch.dtype) -> str:
    return "ieee" if dtype == torch.float32 else "tf32"  # ignored for bf16 / fp16


def _blocks(M: int, nout: int, kc: int, config) -> tuple[int, int, int, int, int]:
    if config is not None:
        bm, bn, bk, warps, stages = config
    elif _interpreting():
        bm, bn, bk, warps, stages = 64, 128, 64, 4, 1
    else:
        bm, bn, bk, warps, stages = _DEFAULT
    bn = min(bn, triton.next_power_of_2(nout))
    bk = min(bk, kc)
    if kc % bk or nout % bn or bk < 16 or bn < 16:
        raise ValueError(f"channels {kc} -> {nout}: no tile fits (BLOCK_K {bk}, BLOCK_N {bn})")
    return bm, bn, bk, warps, stages


def recurrent_conv(hpad: torch.Tensor, w_packed: torch.Tensor, out: torch.Tensor, k: int, config=None) -> None:
    """out (B, 4Ch, H, W) = conv(hpad (B, Ch, H+k-1, W+k-1), W), both channels-last; ``w_packed`` from
    ``pack_forward``. ``config``: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), for the benchmark's sweep."""
    B, Ch, HP, WP = hpad.shape
    _, nout, H, W = out.shape
    if not (_nhwc(hpad) and _nhwc(out)) or w_packed.shape != (k * k * Ch, nout):
        raise ValueError("recurrent_conv: channels-last hpad / out and a packed weight expected")
    M = B * H * W
    bm, bn, bk, warps, stages = _blocks(M, nout, Ch, config)
    grid = (triton.cdiv(M, bm), nout // bn)
    gather_gemm_kernel[grid](
        hpad, w_packed, out, M, H, W, HP, WP, 0, 0, H, W, 0, 0,
        KC=Ch, NOUT=nout, KS=k, SGN=1, CHECK=False, PREC=_precision(hpad.dtype),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)


def recurrent_conv_dgrad(dg: torch.Tensor, w_packed: torch.Tensor, dhpad: torch.Tensor, pads, config=None) -> None:
    """The interior of dhpad (B, Ch, HP, WP) = the data gradient of ``recurrent_conv`` for output gradient dg
    (B, 4Ch, H, W), both channels-last; ``w_packed`` from ``pack_dgrad``; pads = (top, bottom, left, right). The
    border of dhpad is not written (the gradient of the zero border is never used)."""
    B, nin, H, W = dg.shape
    _, Ch, HP, WP = dhpad.shape
    top, bottom, left, right = pads
    k = top + bottom + 1
    if not (_nhwc(dg) and _nhwc(dhpad)) or w_packed.shape != (k * k * nin, Ch):
        raise ValueError("recurrent_conv_dgrad: channels-last dg / dhpad and a packed weight expected")
    M = B * H * W
    bm, bn, bk, warps, stages = _blocks(M, Ch, nin, config)
    grid = (triton.cdiv(M, bm), Ch // bn)
    gather_gemm_kernel[grid](
        dg, w_packed, dhpad, M, H, W, H, W, top, left, HP, WP, top, left,
        KC=nin, NOUT=Ch, KS=k, SGN=-1, CHECK=True, PREC=_precision(dg.dtype),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
