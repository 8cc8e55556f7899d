"""Inference through a ConvLSTM level with one program per window (``window_lstm_kernel``): all steps in one launch.

The per-step path (``convlstm.py``) runs, for each step t >= 1 over the whole batch, a cuDNN recurrent convolution
(h_{t-1} in, the recurrent gates out) and the cell kernel (input and recurrent gates, c_{t-1} in; c_t, h_t out):
about 36 bytes of HBM traffic per hidden element and step at the scoring batch, where nothing of a step fits in L2
(level 1: 3,591 windows x 28,800 elements). Here one program carries one window through every step: the
recurrent convolution is a GEMM over the window's pixels with the gates kept in registers, and the window's
h_{t-1} and c_{t-1}, written by the same program a moment before, come back from L2; what must cross HBM is the
input gates (8 bytes) and the output h (2 bytes).

It serves inference only (no gate pre-activations are stored for a backward) on channels-last buffers, in bf16 /
fp16, for hidden channels a power of two up to ``MAX_CH`` (every tile of every step reads a tap's whole weight).
Elsewhere the per-step path runs. MSCRED_WINDOW_LSTM=0 turns it off, =all also takes float32 (exact dots: the CPU
interpreter's tests).
"""
from __future__ import annotations

import os

import torch

from mscred.ops.triton.runtime import interpreting, triton

if triton is not None:
    from mscred.ops.triton.convlstm_kernels import window_lstm_kernel

# Levels 1-2 of the default model (32, 64 channels). A tap's weight, (Ch, 4Ch), is one tile in shared memory (32 KB
# in bf16 at 64 channels, 128 KB at 128): wider levels would need the taps cut into K-chunks (not built).
MAX_CH = 64


def _choice() -> str:
    choice = os.environ.get("MSCRED_WINDOW_LSTM", "1").strip().lower()
    if choice not in ("0", "1", "all"):
        raise ValueError(f"MSCRED_WINDOW_LSTM must be 0, 1 or all, got {choice!r}")
    return choice


def runs(dtype: torch.dtype, layout: str, save: bool, ch: int) -> bool:
    """Whether a level of ``ch`` hidden channels runs ``window_lstm_kernel``: inference (``save`` False),
    channels-last, ``ch`` a power of two from 16 (the tensor cores' K granule) to MAX_CH, bf16 / fp16 (float32 too
    with MSCRED_WINDOW_LSTM=all: exact dots, for the CPU interpreter's tests); never float64 (Triton's float64
    dot) nor with MSCRED_WINDOW_LSTM=0."""
    choice = _choice()
    if save or layout != "nhwc" or choice == "0" or ch < 16 or ch > MAX_CH or ch & (ch - 1):
        return False
    return dtype in (torch.bfloat16, torch.float16) or (choice == "all" and dtype == torch.float32)


# (BLOCK_M, num_warps, num_stages, prefetch) per hidden-channel count; others take DEFAULT_BLOCKS.
BLOCKS = {32: (64, 8, 2, 1), 64: (64, 8, 2, 1)}
DEFAULT_BLOCKS = (32, 4, 2, 1)
INTERPRETER_BLOCKS = (64, 4, 1, 1)  # the CPU interpreter pays per program step: few, large tiles


def blocks(ch: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, num_warps, num_stages, prefetch) for ``ch`` hidden channels (prefetch 1: the next tile's input
    gates are loaded before this tile's work). MSCRED_WINDOW_LSTM_BLOCKS overrides (sweeps, A/B runs):
    "BM/warps/stages/prefetch" for every level, or per channel count "CH:BM/warps/stages/prefetch;CH:..." (levels
    not named keep their defaults). "/" and ";" because the device scripts pass variables as comma-separated
    lists."""
    chosen = INTERPRETER_BLOCKS if interpreting() else BLOCKS.get(ch, DEFAULT_BLOCKS)
    for entry in filter(None, os.environ.get("MSCRED_WINDOW_LSTM_BLOCKS", "").split(";")):
        level, _, tile = entry.rpartition(":")
        if not level or int(level) == ch:
            chosen = tuple(int(v) for v in tile.split("/"))
    return chosen


def packed_weight(w_h: torch.Tensor) -> torch.Tensor:
    """The recurrent weight (4Ch, Ch, k, k) as the kernel's (k*k*Ch, 4Ch) matrix: row (ky*k + kx)*Ch + ci."""
    four_ch, ch, k, _ = w_h.shape
    return w_h.permute(2, 3, 1, 0).reshape(k * k * ch, four_ch).contiguous()


def run(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, cell: torch.Tensor, out: torch.Tensor, pads,
        forget_bias: float) -> None:
    """Every step of one level for every window: out (B, T, Ch, H, W), channels contiguous, from the input gates
    gx (B, T, 4Ch, H, W) (any strides: a crop, or the sliding view of shared steps), the bias and the recurrent
    weight w_h (4Ch, Ch, k, k); ``cell`` is a (B, Ch, H, W) channels-last float32 scratch for c."""
    B, T, Ch, H, W = out.shape
    if out.stride(2) != 1 or cell.stride(1) != 1:
        raise ValueError("window_lstm_kernel needs channels-last h and c")
    k = w_h.shape[-1]
    bm, warps, stages, prefetch = blocks(Ch)
    sb, st, _, sy, sx = out.stride()
    window_lstm_kernel[(B,)](
        gx, *gx.stride(), bias, packed_weight(w_h), cell, cell.stride(0), cell.stride(3),
        out, sb, st, sy, sx, T, H * W, H, W, pads[0], pads[2], forget_bias,
        CH=Ch, KS=k, PREC="ieee" if out.dtype == torch.float32 else "tf32",
        BLOCK_M=bm, BLOCK_K=triton.next_power_of_2(k * k * Ch), PREFETCH=bool(prefetch),
        num_warps=warps, num_stages=stages)
