"""The training ConvLSTM's steps with the recurrent convolution inside the cell kernels (levels of 16-64 channels).

``convlstm_train`` runs, per step t >= 1 over the whole batch, a recurrent convolution and a cell kernel each way:
forward, cuDNN writes the recurrent gates (B, 4Ch, H, W) and the cell kernel reads them back; backward, cuDNN's
transposed convolution writes the recurrent gradient of h_t and the cell kernel reads it. Here each step is one
Triton kernel each way (``convlstm_step_kernels``): the recurrent convolution is a GEMM per tile of pixels and
block of hidden channels, its result kept in registers, so the gates' round trip and two launches per step go
(at level 1, batch 128: about 59 MB of HBM traffic per forward step). The input convolution of all steps and the
weight gradients stay one cuDNN call each per level.

Where: channels-last ("nhwc") buffers, hidden channels a power of two from 16 (the tensor cores' K granule) to
``MAX_CH`` (levels 1-2 of the default model; wider levels would need the (4Ch, Ch) weight tiles cut further), bf16
/ fp16 on CUDA. MSCRED_STEP_GEMM=0 keeps the cuDNN-and-cell-kernel path everywhere (A/B runs); =all takes float32
too (exact dots: the CPU interpreter's tests; never float64, Triton's float64 dot). The backward also needs the
steps stored time-major (the training layout's order, ``convlstm._images``): batch-major steps keep the old path,
whose cell kernel writes the gate gradients in both orders.
"""
from __future__ import annotations

import os

import torch

from mscred.ops.triton.runtime import interpreting, triton

if triton is not None:
    from mscred.ops.triton.convlstm_step_kernels import step_bwd_kernel, step_fwd_kernel

MIN_CH, MAX_CH = 16, 64
# (BLOCK_M pixels, BC hidden channels, num_warps, BK) per program and hidden-channel count, forward and backward;
# BK is the backward GEMM's K chunk (gate channels per dot; the forward's K chunk is one tap's CH channels). Tiles
# that ptxas compiles without spilling (sm_90, Triton 3.9 on the CPU box: 4-warp tiles of 64 x 32 spill, 8-warp
# ones take 128-250 registers); MSCRED_STEP_BLOCKS overrides (benchmarks/bench_train_steps.py sweeps).
FWD_BLOCKS = {32: (64, 32, 8, 32), 64: (64, 32, 8, 32)}
BWD_BLOCKS = {32: (64, 32, 8, 32), 64: (64, 32, 8, 32)}
DEFAULT_BLOCKS = (64, 16, 8, 32)
INTERPRETER_BLOCK_M = 256  # the CPU interpreter pays per program: few, large tiles


def _choice() -> str:
    choice = os.environ.get("MSCRED_STEP_GEMM", "1").strip().lower()
    if choice not in ("0", "1", "all"):
        raise ValueError(f"MSCRED_STEP_GEMM must be 0, 1 or all, got {choice!r}")
    return choice


def runs(dtype: torch.dtype, layout: str, ch: int, device: torch.device) -> bool:
    """Whether a training level of ``ch`` hidden channels runs the step kernels (see the module docstring)."""
    choice = _choice()
    if triton is None or choice == "0" or layout != "nhwc" or not MIN_CH <= ch <= MAX_CH or ch & (ch - 1):
        return False
    if choice == "all":
        return dtype in (torch.bfloat16, torch.float16, torch.float32)
    return dtype in (torch.bfloat16, torch.float16) and device.type == "cuda"


def blocks(direction: str, ch: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BC, num_warps, BK) of ``direction`` ("fwd" or "bwd") for ``ch`` hidden channels.
    MSCRED_STEP_BLOCKS overrides (sweeps, A/B runs): "DIR:CH:BM/BC/warps[/BK];..." with DIR fwd or bwd and CH a
    channel count or * for every level ("/" and ";" because the device scripts pass variables as comma-separated
    lists)."""
    table = FWD_BLOCKS if direction == "fwd" else BWD_BLOCKS
    bm, bc, warps, bk = table.get(ch, DEFAULT_BLOCKS)
    for entry in filter(None, os.environ.get("MSCRED_STEP_BLOCKS", "").split(";")):
        try:
            where, level, tile = entry.split(":")
            fields = tuple(int(v) for v in tile.split("/"))
        except ValueError:
            fields, where = (), ""
        if len(fields) not in (3, 4) or where not in ("fwd", "bwd"):
            raise ValueError(f"MSCRED_STEP_BLOCKS: an entry is DIR:CH:BM/BC/warps[/BK], got {entry!r}")
        if where == direction and level in ("*", str(ch)):
            bm, bc, warps = fields[:3]
            bk = fields[3] if len(fields) == 4 else bk
    if interpreting():
        bm = INTERPRETER_BLOCK_M
    return bm, min(bc, ch), warps, min(bk, 4 * ch)


def _precision(dtype: torch.dtype) -> str:
    return "ieee" if dtype == torch.float32 else "tf32"  # (tf32 is ignored for 16-bit operands)


def _launch(direction: str, M: int, ch: int):
    bm, bc, warps, bk = blocks(direction, ch)
    return (triton.cdiv(M, bm), ch // bc), bm, bc, warps, bk


def pixel_strides(t: torch.Tensor) -> tuple[int, int, int]:
    """(batch, channel, pixel) strides of a (B, C, H, W) view whose H, W flatten to one pixel index."""
    sb, sc, sy, sx = t.stride()
    if t.shape[3] == 1:  # pixel = y: PyTorch may give a size-1 dim any stride
        return sb, sc, sy
    if t.shape[2] != 1 and sy != t.shape[3] * sx:
        raise ValueError(f"pixel dims of a {tuple(t.shape)} tensor with strides {t.stride()} do not flatten")
    return sb, sc, sx


def forward(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, out: torch.Tensor, pre: torch.Tensor,
            cells: torch.Tensor, hprev: torch.Tensor, pads, forget_bias: float) -> None:
    """Every step of one level: fills ``out`` (B, T, Ch, H, W), ``pre`` (T, B, 4Ch, H, W), ``cells`` (T, B, Ch, H,
    W) and the interiors of ``hprev`` (T-1, B, Ch, Hp, Wp), whose borders the caller zeroed, from the input gates gx
    (B, T, 4Ch, H, W), the bias and the recurrent weight w_h (4Ch, Ch, k, k); as ``convlstm._forward_steps`` with
    ``save``."""
    B, T, _, H, W = gx.shape
    Ch, k = out.shape[2], w_h.shape[-1]
    M = B * H * W
    grid, bm, bc, warps, _ = _launch("fwd", M, Ch)
    for t in range(T):
        gxt, ht = gx[:, t], out[:, t]
        hp = hprev[t - 1] if t > 0 else hprev[0] if T > 1 else ht  # h_{t-1}; a dummy at t = 0, never read
        hn = hprev[t] if t < T - 1 else hp                         # dummy at the last step
        step_fwd_kernel[grid](
            gxt, *gxt.stride(), bias, hp, *hp.stride(), w_h, *w_h.stride(),
            pre[t], *pixel_strides(pre[t]), cells[t - 1] if t > 0 else cells[t], cells[t], *pixel_strides(cells[t]),
            ht, *pixel_strides(ht), hn, *hn.stride(),
            M, H * W, W, pads[0], pads[2], forget_bias,
            CH=Ch, BC=bc, KS=k, HAS_REC=t > 0, WRITE_HP=t < T - 1, PREC=_precision(gx.dtype), BLOCK_M=bm,
            num_warps=warps,
        )


def backward(dout: torch.Tensor, pre: torch.Tensor, cells: torch.Tensor, w_h: torch.Tensor, dpre: torch.Tensor,
             dc: torch.Tensor, db: torch.Tensor, pads, forget_bias: float) -> None:
    """Every step of one level, newest first: fills ``dpre`` (T, B, 4Ch, H, W), the gate gradients, and adds the
    bias gradient into ``db`` (4Ch,) float32, from dout (B, T, Ch, H, W) and the forward's ``pre`` and ``cells``;
    ``dc`` (B, Ch, H, W) float32 is scratch (the running cell gradient). As ``convlstm_train_backward``'s loop."""
    T, B, _, H, W = pre.shape
    Ch, k = cells.shape[2], w_h.shape[-1]
    M = B * H * W
    grid, bm, bc, warps, bk = _launch("bwd", M, Ch)
    for t in reversed(range(T)):
        dout_t = dout[:, t]
        nxt = dpre[t + 1] if t < T - 1 else dpre[t]  # a dummy at the last step, never read
        step_bwd_kernel[grid](
            pre[t], *pixel_strides(pre[t]), cells[t - 1] if t > 0 else cells[t], cells[t],
            *pixel_strides(cells[t]), dout_t, *pixel_strides(dout_t), nxt, *nxt.stride(), w_h, *w_h.stride(),
            dc, *pixel_strides(dc), dpre[t], *pixel_strides(dpre[t]), db,
            M, H * W, H, W, pads[0], pads[2], forget_bias,
            CH=Ch, BC=bc, KS=k, HAS_CPREV=t > 0, HAS_NEXT=t < T - 1, PREC=_precision(pre.dtype), BLOCK_M=bm,
            BK=bk, num_warps=warps,
        )
