"""The 128-byte-swizzled K-major operand of wgmma, as our kernels stage it and as the tensor core reads it.

Shared by the CPU replays of the wgmma kernels (test_wgmma_layout.py, test_halo_s2_layout.py): the kernels' staging
formula (wgmma.cuh's ``sw128_offset``) and, independently, the hardware's reading of a shared-memory descriptor
(the PTX ISA's description), so that a replay checks the one against the other.
"""
from __future__ import annotations


def sw128_offset(rows: int, r: int, k: int) -> int:
    """Byte offset of element k of row r (wgmma.cuh's sw128_offset<ROWS>): 32-element K-blocks of `rows` rows."""
    return (k // 32) * rows * 128 + r * 128 + ((((k % 32) // 4) ^ (r % 8)) << 4) + (k % 4) * 4


def wgmma_b_address(start: int, row: int, e: int) -> int:
    """Where the tensor core reads element e (0..7) of row `row` of a K-major 4-byte operand in the 128-byte swizzle
    from a descriptor whose start address is `start` (the operand's region 1024-byte aligned, stride byte offset
    1024): rows 128 bytes apart in 8-row atoms 1024 bytes apart, then bits [4, 7) of the byte address XORed with bits
    [7, 10)."""
    addr = start + (row // 8) * 1024 + (row % 8) * 128 + 4 * e
    return addr ^ (((addr >> 7) & 7) << 4)


def k8_block_start(rows: int, k0: int) -> int:
    """The descriptor's start address for the k8-block at element k0 (a multiple of 8): its K-block's base plus
    4 k0 % 128 bytes, the advance within the swizzle atom our kernels use (+2 in the descriptor per k8-block)."""
    return (k0 // 32) * rows * 128 + 4 * (k0 % 32)
