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


if triton is not None:
    from mscred.ops.triton.bits import bf16_bits, bf16_value  # (jit helpers: defined only with Triton)

    @triton.jit
    def _transpose_kernel(src_ptr, out_ptr, table_ptr, INVERSE: tl.constexpr, ROUND_BF16: tl.constexpr,
                          WIDEN_BF16: tl.constexpr, I_BLOCK: tl.constexpr, I_BLOCK_FEW_TAPS: tl.constexpr,
                          K_PAD: tl.constexpr):
        row = table_ptr + tl.program_id(0) * 4
        a0 = tl.load(row)
        b0 = tl.load(row + 1)
        ip = tl.load(row + 2)
        kk = tl.load(row + 3)
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
