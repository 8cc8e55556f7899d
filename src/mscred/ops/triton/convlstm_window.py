"""Inference through a ConvLSTM level with one program per window (``window_lstm_kernel``): all steps in one launch.

The per-step path (``convlstm.py``) runs, for each step t >= 1 over the whole batch, a cuDNN recurrent convolution
(h_{t-1} in, the recurrent gates out) and the cell kernel (input and recurrent gates, c_{t-1} in; c_t, h_t out):
two launches per step and about 36 bytes of HBM traffic per hidden element and step. Here one program carries one
window through every step: the recurrent weight is loaded into shared memory once, the recurrent convolution is
one GEMM per pixel tile over all taps with the gates kept in registers, and the window's h_{t-1} and c_{t-1},
written by the same program a moment before, are read back (from L2 when they are still there).

Measured on the H200 (``benchmarks/results/window_lstm*``, README): at small batches it is 1.6x (32 channels) and
3.5x (64 channels) faster per level than the per-step path (batch 128); at the full scoring batch (3,591 windows)
it is slower on level 2 (0.69-0.75x): Nsight Compute shows about half the per-step path's HBM bytes but an L2 hit
rate of ~35% (the windows in flight do not fit in L2) and 35% of the HBM bandwidth, each program a chain of
dependent tiles at 25-35% occupancy (fewer programs, each taking window after window so that the windows in flight
fit in L2, were no faster: results/window_programs/). Level 1 was even there with a float32 cell state and is 1.06x
with the float16 one, 1.10x with four blocks per SM under a register cap (``LARGE_BATCH_BLOCKS``; the chain per
program is what bounds it, so more programs per SM help where windows enough fill them). Part of the small-batch
gain is launches, which a CUDA graph removes anyway. Hence the gate on the batch (``MIN_BATCH`` .. ``MAX_BATCH``, no
upper bound for ``ANY_BATCH_CH``).

It serves inference only (no gate pre-activations are stored for a backward) on channels-last buffers, in bf16 /
fp16, for hidden channels a power of two up to ``MAX_CH`` whose tile fits in shared memory (``plan``), at batches
from ``MIN_BATCH`` (``MIN_BATCH_CAPTURED`` in a CUDA graph) to ``MAX_BATCH`` windows (32 channels: any batch from
``MIN_BATCH``). Elsewhere the per-step path
runs. MSCRED_WINDOW_LSTM=0 turns it off, =all takes every
batch and float32 too (exact dots: the CPU interpreter's tests; A/B runs), =all:32 only for the 32-channel level.
"""
from __future__ import annotations

import functools
import os

import torch

from mscred.ops.triton.runtime import HOPPER_SHARED_MEMORY, interpreting, triton

if triton is not None:
    from mscred.ops.triton.convlstm_kernels import window_lstm_kernel

# Levels 1-2 of the default model (32, 64 channels): the whole recurrent weight, (k*k*Ch, 4Ch), is one tile in shared
# memory (32 KB in bf16 at 32 channels, 128 KB at 64); wider levels would need it cut into K-chunks (not built).
MAX_CH = 64
# The batches (windows per call) at which the kernel beat the per-step path in the whole model on the H200
# (results/window_model/, the kernel forced against off): eager 1.15-1.38x from 128 to 1,024 windows (0.83x at 32);
# inside a CUDA graph, which removes the per-step path's launches, 1.05-1.07x at 256-512 (0.76x at 32, 0.98x at
# 128); from 1,024 on even. Since the cell state of bf16 inference is float16 (half the bytes a window reads back),
# the 32-channel level with its tile below is faster at the scoring batch of 3,591 windows too (alone 1.06x; whole
# model, graphed, 224,498 -> 239,582 windows/s, results/window_programs/): no upper batch for it (ANY_BATCH_CH).
MIN_BATCH, MIN_BATCH_CAPTURED, MAX_BATCH = 128, 256, 1024
ANY_BATCH_CH = frozenset({32})
# The batch-dependent choices (ANY_BATCH_CH, LARGE_BATCH_BLOCKS) were measured with the model's default 2 x 2
# ConvLSTM kernel; a 3 x 3 one (ModelConfig.lstm_kernel) keeps the bounds and tiles measured before them.
MEASURED_K = 2

# (BLOCK_M, num_warps, num_stages, prefetch, maxnreg) per hidden-channel count (others: DEFAULT_BLOCKS); prefetch 1
# loads the next tile's input gates before this tile's work; maxnreg > 0 caps ptxas's registers per thread (0: its
# own choice, 255 for the 8-warp tiles: one block per SM), so that more blocks fit on an SM. From the H200 sweeps
# (results/window_lstm/; 32 channels: results/window_programs/, the fastest at the scoring batch in both sweeps,
# 4.83 against 5.36 ms for (64, 8, 2, 0)).
BLOCKS = {32: (64, 8, 1, 1, 0), 64: (64, 8, 2, 0, 0)}
# From LARGE_BATCH windows on, level 1 takes four 4-warp blocks per SM (32-pixel tiles under a 128-register cap)
# instead of one 8-warp block: each program is a chain of dependent loads, so more of them per SM is what pays once
# there are windows enough to fill the slots (results/window_maxnreg/: level 1 alone at the scoring batch 4.62
# against 5.02 ms; whole model, graphed, in alternation 1.02x at 3,591 windows, 1.03x at 1,024, but 0.94x at 256).
LARGE_BATCH = 1024
LARGE_BATCH_BLOCKS = {32: (32, 4, 1, 1, 128)}
DEFAULT_BLOCKS = (32, 4, 2, 0, 0)
INTERPRETER_BLOCKS = (64, 4, 1, 1, 0)  # the CPU interpreter pays per program step: few, large tiles


def _choice(ch: int) -> str:
    """MSCRED_WINDOW_LSTM for a level of ``ch`` hidden channels: "0", "1" or "all"; "all:CH+CH..." is "all" for
    the levels of those channel counts and "0" for the others (A/B runs of one level)."""
    choice = os.environ.get("MSCRED_WINDOW_LSTM", "1").strip().lower()
    head, colon, levels = choice.partition(":")
    try:
        chosen = {int(v) for v in levels.split("+")} if colon else None
    except ValueError:
        chosen = set()
    if head not in ("0", "1", "all") or (colon and (head != "all" or not chosen)):
        raise ValueError(f"MSCRED_WINDOW_LSTM must be 0, 1, all or all:CH+CH..., got {choice!r}")
    return "0" if chosen is not None and ch not in chosen else head


def runs(dtype: torch.dtype, layout: str, save: bool, ch: int, k: int, batch: int, device: torch.device) -> bool:
    """Whether a level of ``ch`` hidden channels and kernel ``k`` runs ``window_lstm_kernel`` for ``batch``
    windows on ``device``: inference (``save`` False), channels-last, ``ch`` a power of two from 16 (the tensor
    cores' K granule) to MAX_CH with a tile that fits the device's shared memory (``plan``), bf16 / fp16 at MIN_BATCH
    (MIN_BATCH_CAPTURED in a graph capture) to MAX_BATCH windows (no upper bound for the levels in ANY_BATCH_CH);
    with MSCRED_WINDOW_LSTM=all any batch and float32 too; never float64 (Triton's float64 dot) nor with =0."""
    choice = _choice(ch)
    if triton is None or save or layout != "nhwc" or choice == "0" or ch < 16 or ch > MAX_CH or ch & (ch - 1):
        return False
    if choice == "all":
        dtypes, batches = (torch.bfloat16, torch.float16, torch.float32), True
    else:
        top = batch if ch in ANY_BATCH_CH and k == MEASURED_K else MAX_BATCH
        dtypes, batches = (torch.bfloat16, torch.float16), _min_batch(device) <= batch <= top
    return dtype in dtypes and batches and plan(ch, k, dtype, shared_limit(device), batch) is not None


def _min_batch(device: torch.device) -> int:
    """MIN_BATCH, or MIN_BATCH_CAPTURED while a CUDA graph is being captured (its replays have no launch cost)."""
    capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    return MIN_BATCH_CAPTURED if capturing else MIN_BATCH


def shared_limit(device: torch.device) -> int:
    """Shared memory a block may use on ``device``, as Triton checks it (HOPPER_SHARED_MEMORY off CUDA)."""
    if device.type != "cuda":
        return HOPPER_SHARED_MEMORY
    return _cuda_shared_limit(torch.cuda.current_device() if device.index is None else device.index)


@functools.lru_cache(maxsize=None)
def _cuda_shared_limit(index: int) -> int:
    return triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]


def blocks(ch: int, batch: int = 0) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, num_warps, num_stages, prefetch, maxnreg) asked for ``ch`` hidden channels and ``batch`` windows
    (LARGE_BATCH_BLOCKS from LARGE_BATCH on).
    MSCRED_WINDOW_LSTM_BLOCKS overrides (sweeps, A/B runs): "BM/warps/stages/prefetch[/maxnreg]" for every level,
    or per channel count "CH:BM/warps/stages/prefetch;CH:..." (levels not named keep their defaults; maxnreg 0 when
    left out). "/" and ";" because the device scripts pass variables as comma-separated lists."""
    if interpreting():
        chosen = INTERPRETER_BLOCKS
    elif batch >= LARGE_BATCH and ch in LARGE_BATCH_BLOCKS:
        chosen = LARGE_BATCH_BLOCKS[ch]
    else:
        chosen = BLOCKS.get(ch, DEFAULT_BLOCKS)
    for entry in filter(None, os.environ.get("MSCRED_WINDOW_LSTM_BLOCKS", "").split(";")):
        level, _, tile = entry.rpartition(":")
        if not level or int(level) == ch:
            fields = tuple(int(v) for v in tile.split("/"))
            if len(fields) not in (4, 5):
                raise ValueError(f"MSCRED_WINDOW_LSTM_BLOCKS: a tile is BM/warps/stages/prefetch[/maxnreg], got "
                                 f"{tile!r}")
            chosen = fields + (0,) * (5 - len(fields))
    return chosen


def shared_bytes(ch: int, k: int, itemsize: int, block_m: int, stages: int) -> int:
    """The shared memory ``plan`` budgets for a tile, from what Triton asked for: 45-213 KB over the sweeps' tiles
    (Triton 3.9's sm_90 compile on the CPU box), 295 and 400 KB for two tiles the H200 refused (Triton 3.6,
    results/window_lstm/{bench_log,gpu_tests}.txt). It counts the resident weight (K, 4Ch), the pipeline's gathered
    h tiles (stages x (BLOCK_M, K)) and up to a (BLOCK_M, 4Ch) 16-bit layout change; K = k*k*Ch rounded up to a
    power of two. Not an upper bound for every tile: a prefetching single-stage tile can ask for one more
    (BLOCK_M, K) tile (level 1's large-batch tile, 32 x 128, 57,344 against 49,152 bytes in Triton 3.9's sm_90
    compile) -- tests/test_ops_triton_convlstm.py compiles every tile ``plan`` picks for sm_90 and checks the
    compiled size against this plus that tile and against the H200's limit."""
    kk = triton.next_power_of_2(k * k * ch)
    return itemsize * (kk * 4 * ch + max(stages, 1) * block_m * kk) + block_m * 4 * ch * 2


def plan(ch: int, k: int, dtype: torch.dtype, limit: int = HOPPER_SHARED_MEMORY, batch: int = 0):
    """``blocks(ch, batch)`` with BLOCK_M halved (down to 16), then a single stage, until ``shared_bytes`` fits
    ``limit``: (BLOCK_M, num_warps, num_stages, prefetch, maxnreg), or None if no tile fits (the per-step path
    runs)."""
    bm, warps, stages, prefetch, maxnreg = blocks(ch, batch if k == MEASURED_K else 0)
    itemsize = dtype.itemsize
    for st in (stages, 1):
        m = bm
        while m >= 16:
            if shared_bytes(ch, k, itemsize, m, st) <= limit:
                return m, warps, st, prefetch, maxnreg
            m //= 2
    return None


def kernel_constants(ch: int, k: int, dtype: torch.dtype, block_m: int, prefetch: int) -> dict:
    """``window_lstm_kernel``'s constexpr arguments for a level of ``ch`` hidden channels, kernel ``k`` and the tile
    ``plan`` chose (its BLOCK_M and prefetch)."""
    return dict(CH=ch, KS=k, PREC="ieee" if dtype == torch.float32 else "tf32", BLOCK_M=block_m,
                BLOCK_K=triton.next_power_of_2(k * k * ch), PREFETCH=bool(prefetch))


def packed_weight(w_h: torch.Tensor) -> torch.Tensor:
    """The recurrent weight (4Ch, Ch, k, k) as the kernel's (k*k*Ch, 4Ch) matrix: row (ky*k + kx)*Ch + ci."""
    four_ch, ch, k, _ = w_h.shape
    return w_h.permute(2, 3, 1, 0).reshape(k * k * ch, four_ch).contiguous()


def run(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, cell: torch.Tensor, out: torch.Tensor, pads,
        forget_bias: float) -> None:
    """Every step of one level for every window: out (B, T, Ch, H, W), channels contiguous, from the input gates
    gx (B, T, 4Ch, H, W) (any strides: a crop, or the sliding view of shared steps), the bias and the recurrent
    weight w_h (4Ch, Ch, k, k); ``cell`` is a (B, Ch, H, W) channels-last scratch for c (float32; float16 for bf16
    and fp16 inputs)."""
    B, T, Ch, H, W = out.shape
    if out.stride(2) != 1 or cell.stride(1) != 1:
        raise ValueError("window_lstm_kernel needs channels-last h and c")
    k = w_h.shape[-1]
    bm, warps, stages, prefetch, maxnreg = plan(Ch, k, out.dtype, shared_limit(out.device), B)
    # The interpreter runs no ptxas: the register cap is a compile option only.
    cap = {"maxnreg": maxnreg} if maxnreg and not interpreting() else {}
    sb, st, _, sy, sx = out.stride()
    window_lstm_kernel[(B,)](
        gx, *gx.stride(), bias, packed_weight(w_h), cell, cell.stride(0), cell.stride(3),
        out, sb, st, sy, sx, T, H * W, H, W, pads[0], pads[2], forget_bias,
        **kernel_constants(Ch, k, out.dtype, bm, prefetch), num_warps=warps, num_stages=stages, **cap)
