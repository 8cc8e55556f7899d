"""The weight cache's layout changes (``ops/weight_cache.py``): many small 2-D transposes, each with a dtype cast,
in one kernel.

Every convolution weight target of the fused bf16 training step is, output channel by output channel, a transpose:
master row o of an (O, I, kh, kw) float32 weight holds its input channels [lo, hi) as an (Ip, K) block (K = kh*kw
taps, contiguous), and the channels-last target wants that block as (K, Ip). A table lists every block -- (start in
the source, start in the destination, Ip, K) -- and one program transposes one block, loading it along its
contiguous axis and storing along the other's (Triton's coalescing puts the exchange through shared memory). The
backward runs the same table the other way (``inverse``). Each element is read and written once, contiguously; the
index gather it replaced read 4-byte index words and strided source elements, 22.8 us forward for 3.2 M elements on
the H200 (benchmarks/results/pack_split2/train_step_profile.txt).

A block of up to 4 taps (the 2 x 2 weights: the ConvLSTM gates, 2.6 M of the default model's 3.2 M elements) is
moved as one (256 x 4) tile per 256 channels; a 9-tap block as (64 x 16) tiles, its tap axis padded. With one tile
shape for all (64 x 16, padded to the largest block's taps) a 256-channel 4-tap block took 4 dependent iterations
with three quarters of the lanes masked: 19.0 us forward, 13.0 us backward in the graphed step
(``results/small_conv_confirm/profile/``); with the two tile shapes 9.8 and 6.9 us (``results/transpose_taps/``).

``transpose_blocks(src, table, numel, dtype, taps, inverse=False)`` runs where the Triton kernels run (CUDA, or
the CPU interpreter); elsewhere the weight cache gathers by its plan's index instead.
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import runs_fused, tl, triton

I_BLOCK = 64  # input channels per iteration; the tap axis is padded to a power of two (K = 4 or 9 -> 4 or 16)
I_BLOCK_FEW_TAPS = 256  # input channels per iteration of a block of at most 4 taps (a tile of 1,024 like 64 x 16)


def transpose_blocks(src: torch.Tensor, table: torch.Tensor, numel: int, dtype: torch.dtype, taps: int,
                     inverse: bool = False) -> torch.Tensor:
    """A 1-D tensor of ``numel`` elements of ``dtype``: for each row (a, b, Ip, K) of the int32 ``table`` (n, 4) on
    src's device, ``out[b + k*Ip + i] = src[a + i*K + k]`` (``inverse``: ``out[a + i*K + k] = src[b + k*Ip + i]``)
    for i < Ip, k < K <= ``taps``. The blocks must cover ``out`` (each element written once)."""
    if src.dim() != 1 or not src.is_contiguous() or table.dim() != 2 or table.shape[1] != 4:
        raise ValueError(f"transpose_blocks wants a 1-D contiguous source and an (n, 4) table, got "
                         f"{tuple(src.shape)} / {tuple(table.shape)}")
    if not runs_fused(src) or table.device != src.device:
        raise ValueError("transpose_blocks runs the Triton kernel: a CUDA source (or the CPU interpreter) and the "
                         "table on its device")
    out = torch.empty(numel, device=src.device, dtype=dtype)
    if table.shape[0]:
        # bf16 <-> float32 as bit arithmetic (ops/triton/bits.py): the interpreter's own conversions differ.
        to_bf16 = src.dtype == torch.float32 and dtype == torch.bfloat16
        from_bf16 = src.dtype == torch.bfloat16 and dtype == torch.float32
        k_pad = max(triton.next_power_of_2(taps), 2)
        _transpose_kernel[(table.shape[0],)](
            src.view(torch.int16) if from_bf16 else src, out.view(torch.int16) if to_bf16 else out, table,
            INVERSE=inverse, ROUND_BF16=to_bf16, WIDEN_BF16=from_bf16, I_BLOCK=I_BLOCK,
            I_BLOCK_FEW_TAPS=I_BLOCK_FEW_TAPS, K_PAD=k_pad, num_warps=4)
    return out


# Sources ``transpose_parts`` takes as separate pointer arguments (the default model has 16 weight targets).
MAX_PARTS = 16


def part_table(blocks: torch.Tensor, offsets: list[int]) -> torch.Tensor:
    """``blocks`` (n, 4) with its target starts made local to their target and each row's target index appended:
    (n, 5) int32 rows (master start, start in the target, channels, taps, target), for ``transpose_parts``.
    ``offsets`` are the targets' starts in the concatenation, ascending."""
    starts = torch.tensor(offsets, dtype=blocks.dtype, device=blocks.device)
    part = torch.searchsorted(starts, blocks[:, 1].contiguous(), right=True) - 1
    local = blocks[:, 1] - starts[part]
    return torch.stack([blocks[:, 0], local, blocks[:, 2], blocks[:, 3], part.to(blocks.dtype)], 1).contiguous()


def transpose_parts(parts: list[torch.Tensor], table: torch.Tensor, numel: int, dtype: torch.dtype,
                    taps: int) -> torch.Tensor:
    """``transpose_blocks(torch.cat(parts), blocks, numel, dtype, taps, inverse=True)`` without the concatenation:
    each row of ``table`` (``part_table``'s) reads the part it names, one pointer argument a part (at most
    MAX_PARTS, all of one dtype, 1-D contiguous). The weight cache's backward: the targets' gradients as they
    come, into the masters' order (the concatenation took 11.4 us of the graphed step on the H200,
    ``results/graph_timeline_shapes/``)."""
    if not 0 < len(parts) <= MAX_PARTS or any(p.dim() != 1 or not p.is_contiguous() or p.dtype != parts[0].dtype
                                              or p.device != parts[0].device for p in parts):
        raise ValueError(f"transpose_parts takes 1 to {MAX_PARTS} 1-D contiguous parts of one dtype and device")
    if table.dim() != 2 or table.shape[1] != 5 or table.device != parts[0].device or not runs_fused(parts[0]):
        raise ValueError("transpose_parts runs the Triton kernel: parts on CUDA (or the CPU interpreter) and an "
                         "(n, 5) table on their device")
    out = torch.empty(numel, device=parts[0].device, dtype=dtype)
    if table.shape[0]:
        to_bf16 = parts[0].dtype == torch.float32 and dtype == torch.bfloat16
        from_bf16 = parts[0].dtype == torch.bfloat16 and dtype == torch.float32
        sources = [p.view(torch.int16) if from_bf16 else p for p in parts]
        sources += [sources[0]] * (MAX_PARTS - len(sources))  # unused arguments: never selected
        _transpose_parts_kernel[(table.shape[0],)](
            *sources, out.view(torch.int16) if to_bf16 else out, table, NPARTS=len(parts), ROUND_BF16=to_bf16,
            WIDEN_BF16=from_bf16, I_BLOCK=I_BLOCK, I_BLOCK_FEW_TAPS=I_BLOCK_FEW_TAPS,
            K_PAD=max(triton.next_power_of_2(taps), 2), num_warps=4)
    return out


if triton is not None:
    from mscred.ops.triton.bits import bf16_bits, bf16_value  # (jit helpers: defined only with Triton)

    @triton.jit
    def _transpose_parts_kernel(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, out_ptr,
                                table_ptr, NPARTS: tl.constexpr, ROUND_BF16: tl.constexpr, WIDEN_BF16: tl.constexpr,
                                I_BLOCK: tl.constexpr, I_BLOCK_FEW_TAPS: tl.constexpr, K_PAD: tl.constexpr):
        """``_transpose_kernel``'s inverse with each row's source picked among the parts by the row's 5th word (the
        pointer arguments cannot be indexed: one select a part, none past NPARTS)."""
        row = table_ptr + tl.program_id(0) * 5
        a0 = tl.load(row)
        b0 = tl.load(row + 1)
        ip = tl.load(row + 2)
        kk = tl.load(row + 3)
        part = tl.load(row + 4)
        src = p0
        if NPARTS > 1:
            src = tl.where(part == 1, p1, src)
        if NPARTS > 2:
            src = tl.where(part == 2, p2, src)
        if NPARTS > 3:
            src = tl.where(part == 3, p3, src)
        if NPARTS > 4:
            src = tl.where(part == 4, p4, src)
        if NPARTS > 5:
            src = tl.where(part == 5, p5, src)
        if NPARTS > 6:
            src = tl.where(part == 6, p6, src)
        if NPARTS > 7:
            src = tl.where(part == 7, p7, src)
        if NPARTS > 8:
            src = tl.where(part == 8, p8, src)
        if NPARTS > 9:
            src = tl.where(part == 9, p9, src)
        if NPARTS > 10:
            src = tl.where(part == 10, p10, src)
        if NPARTS > 11:
            src = tl.where(part == 11, p11, src)
        if NPARTS > 12:
            src = tl.where(part == 12, p12, src)
        if NPARTS > 13:
            src = tl.where(part == 13, p13, src)
        if NPARTS > 14:
            src = tl.where(part == 14, p14, src)
        if NPARTS > 15:
            src = tl.where(part == 15, p15, src)
        _transpose_row(src, out_ptr, a0, b0, ip, kk, True, ROUND_BF16, WIDEN_BF16, I_BLOCK, I_BLOCK_FEW_TAPS, K_PAD)

    @triton.jit
    def _transpose_kernel(src_ptr, out_ptr, table_ptr, INVERSE: tl.constexpr, ROUND_BF16: tl.constexpr,
                          WIDEN_BF16: tl.constexpr, I_BLOCK: tl.constexpr, I_BLOCK_FEW_TAPS: tl.constexpr,
                          K_PAD: tl.constexpr):
        row = table_ptr + tl.program_id(0) * 4
        a0 = tl.load(row)
        b0 = tl.load(row + 1)
        ip = tl.load(row + 2)
        kk = tl.load(row + 3)
        _transpose_row(src_ptr, out_ptr, a0, b0, ip, kk, INVERSE, ROUND_BF16, WIDEN_BF16, I_BLOCK, I_BLOCK_FEW_TAPS,
                       K_PAD)

    @triton.jit
    def _transpose_row(src_ptr, out_ptr, a0, b0, ip, kk, INVERSE: tl.constexpr, ROUND_BF16: tl.constexpr,
                       WIDEN_BF16: tl.constexpr, I_BLOCK: tl.constexpr, I_BLOCK_FEW_TAPS: tl.constexpr,
                       K_PAD: tl.constexpr):
        """One table row: its block with the tile of its tap count."""
        if K_PAD > 4:
            if kk <= 4:  # a 2 x 2 weight's row in a table that also has 3 x 3 ones: no 16-tap padding
                _transpose_block(src_ptr, out_ptr, a0, b0, ip, kk, INVERSE, ROUND_BF16, WIDEN_BF16,
                                 I_BLOCK_FEW_TAPS, 4)
            else:
                _transpose_block(src_ptr, out_ptr, a0, b0, ip, kk, INVERSE, ROUND_BF16, WIDEN_BF16, I_BLOCK, K_PAD)
        else:
            _transpose_block(src_ptr, out_ptr, a0, b0, ip, kk, INVERSE, ROUND_BF16, WIDEN_BF16,
                             I_BLOCK_FEW_TAPS, K_PAD)

    @triton.jit
    def _transpose_block(src_ptr, out_ptr, a0, b0, ip, kk, INVERSE: tl.constexpr, ROUND_BF16: tl.constexpr,
                         WIDEN_BF16: tl.constexpr, I_BLOCK: tl.constexpr, K_PAD: tl.constexpr):
        """One (ip x kk) block, I_BLOCK channels at a time, its tap axis padded to K_PAD."""
        k = tl.arange(0, K_PAD)
        for i0 in range(0, ip, I_BLOCK):
            i = i0 + tl.arange(0, I_BLOCK)
            inside = (i[:, None] < ip) & (k[None, :] < kk)
            master = a0 + i[:, None] * kk + k[None, :]  # (i, k): the master's order
            target = b0 + k[None, :] * ip + i[:, None]  # (k, i): the channels-last target's
            if INVERSE:
                value = tl.load(src_ptr + target, mask=inside, other=0)
                dst = out_ptr + master
            else:
                value = tl.load(src_ptr + master, mask=inside, other=0)
                dst = out_ptr + target
            if ROUND_BF16:  # float32 -> bf16 bits (ops/triton/bits.py)
                tl.store(dst, bf16_bits(value), mask=inside)
            elif WIDEN_BF16:  # bf16 bits -> float32
                tl.store(dst, bf16_value(value), mask=inside)
            else:
                tl.store(dst, value.to(out_ptr.dtype.element_ty), mask=inside)
