"""``dst.copy_(src)`` for (N, C, H, W) views that keep each pixel's channels contiguous, in one Triton kernel.

The fused training step copies channels-last pixels into and out of strided views several times a step: x into the
x half of levels 1-2's concatenated [x, h] buffers (26.4 and 11.3 us on the H200, ``results/next_1206/timeline/``),
the attention output into the decoder's skip concatenations, level 2's dx_t out of the transposed convolution's
[dx, dh]. ``padding.copy_pixels`` does them as PyTorch copies of 8-byte words (a quarter of the 2-byte elements'
index arithmetic), ~2.8 TB/s read + write for level 1's 37 MB; the generic strided kernel decodes every word's
4-D index. Here a program takes a block of pixels, decodes each pixel's (n, y, x) once, and moves its C channels
with 16-byte accesses where the strides allow (Triton specialises strides divisible by 16).

Levels 1-2's copy into [x, h] also zeroes h_{-1} beside x_0 in the same pass (``zeros``): PyTorch's fill of it was a
launch of its own (3.4 and 2.2 us).

``MSCRED_PIXEL_COPY_KERNEL=1`` routes ``copy_pixels`` on CUDA tensors here. Opt-in: on the H200 the graphed bf16
training step took 2.408 / 2.410 / 2.405 ms with it against 2.410 / 2.411 / 2.413 ms without, in alternation
(``results/pixel_copy/``), ~3 us and inside the rounds' spread; ``benchmarks/gpu_next_1207.sh`` reads the
copies' own times. ``copy`` itself also runs on CPU tensors under Triton's interpreter (the tests), where
``copy_pixels`` keeps PyTorch's copy so that the interpreter's other tests do not slow down.
"""
from __future__ import annotations

from typing import Optional

import torch

from mscred.ops.triton.runtime import runs_fused, switched_on, tl, triton

BLOCK = 4096  # elements a program: 8 KB of bf16
NUM_WARPS = 4


def enabled() -> bool:
    """Whether ``padding.copy_pixels`` takes this kernel on CUDA (MSCRED_PIXEL_COPY_KERNEL=1)."""
    return switched_on("MSCRED_PIXEL_COPY_KERNEL")


def suits(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether ``copy`` runs its kernel on this pair: 4-D, same shape and dtype, channels contiguous in both, where
    the kernels run (CUDA, or the CPU interpreter)."""
    return (dst.dim() == 4 and dst.shape == src.shape and dst.dtype == src.dtype and dst.device == src.device
            and dst.stride(1) == 1 and src.stride(1) == 1 and dst.numel() > 0 and runs_fused(dst))


def zeros_fit(dst: torch.Tensor, zeros: torch.Tensor) -> bool:
    """Whether ``zeros`` (K, Cz, H, W) is the Cz channels right after ``dst``'s in the pixels of ``dst``'s first K
    images (levels 1-2's h_{-1} beside x_0 in [x, h]): what ``copy``'s kernel can zero in the same pass."""
    return (zeros.dim() == 4 and zeros.dtype == dst.dtype and zeros.device == dst.device
            and zeros.untyped_storage().data_ptr() == dst.untyped_storage().data_ptr()
            and zeros.shape[0] <= dst.shape[0] and zeros.shape[2:] == dst.shape[2:] and zeros.stride() == dst.stride()
            and zeros.storage_offset() == dst.storage_offset() + dst.shape[1])


def copy(dst: torch.Tensor, src: torch.Tensor, zeros: Optional[torch.Tensor] = None) -> None:
    """``dst.copy_(src)`` (and ``zeros.zero_()``): the kernel where ``suits`` (and ``zeros_fit``), else PyTorch's
    ops."""
    if not suits(dst, src) or (zeros is not None and not zeros_fit(dst, zeros)):
        dst.copy_(src)
        if zeros is not None:
            zeros.zero_()
        return
    N, C, H, W = dst.shape
    zero_images, zero_channels = (zeros.shape[0], zeros.shape[1]) if zeros is not None else (0, 0)
    block_c = triton.next_power_of_2(C)
    block_p = max(1, BLOCK // block_c)
    pixels = N * H * W
    grid = (triton.cdiv(pixels, block_p),)
    _pixel_copy_kernel[grid](dst, dst.stride(0), dst.stride(2), dst.stride(3),
                             src, src.stride(0), src.stride(2), src.stride(3),
                             pixels, H * W, W, C, zero_images * H * W, zero_channels,
                             BLOCK_P=block_p, BLOCK_C=block_c, HAS_ZEROS=zeros is not None,
                             BLOCK_Z=triton.next_power_of_2(max(zero_channels, 1)), num_warps=NUM_WARPS)


if triton is not None:
    @triton.jit
    def _pixel_copy_kernel(d_ptr, d_sn, d_sy, d_sx, s_ptr, s_sn, s_sy, s_sx, P, HW, W, C, PZ, CZ,
                           BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, HAS_ZEROS: tl.constexpr,
                           BLOCK_Z: tl.constexpr):
        # the pixel's (n, y, x) in int32 (a 64-bit division is a software loop); its element offsets in int64, which
        # a large batch's bordered buffers pass 2^31 of
        p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
        n = p // HW
        rest = p - n * HW
        y = rest // W
        x = rest - y * W
        n, y, x = n.to(tl.int64), y.to(tl.int64), x.to(tl.int64)
        c = tl.arange(0, BLOCK_C)
        mask = (p < P)[:, None] & (c < C)[None, :]
        src = s_ptr + (n * s_sn + y * s_sy + x * s_sx)[:, None] + c[None, :]
        pixel = n * d_sn + y * d_sy + x * d_sx
        tl.store(d_ptr + pixel[:, None] + c[None, :], tl.load(src, mask=mask), mask=mask)
        if HAS_ZEROS:  # channels [C, C + CZ) of the first PZ pixels (p counts pixels image by image)
            z = tl.arange(0, BLOCK_Z)
            zmask = (p < PZ)[:, None] & (z < CZ)[None, :]
            zero = tl.zeros([BLOCK_P, BLOCK_Z], dtype=d_ptr.dtype.element_ty)
            tl.store(d_ptr + pixel[:, None] + C + z[None, :], zero, mask=zmask)
