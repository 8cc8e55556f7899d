"""A permutation gather fused with a dtype cast: ``src.index_select(0, index).to(dtype)`` in one kernel.

The weight cache (``ops/weight_cache.py``) moves every weight of the fused bf16 training step between its float32
master layout and the layouts its kernels read, once each way per step. In PyTorch ops that was a cast and a gather
(int64 index) each way, and a concatenation before the backward's: 67 us of the 3.3 ms graphed step on the H200
(benchmarks/results/step_profile_1201c/train_step_profile.txt, 3.2 M elements). Here the cast happens in the gather,
whose index is int32: per element 4 bytes of index, the source element and the destination element.

``gather_cast(src, index, dtype)``: 1-D contiguous ``src``, 1-D int32 or int64 ``index``; off CUDA without the
interpreter it is the PyTorch ops.
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import interpreting, runs_fused, tl, triton

BLOCK = 4096  # elements per program: 3.2 M elements -> ~780 programs, several waves on 132 SMs
INTERPRETER_BLOCK = 65536  # the CPU interpreter pays per program


def gather_cast(src: torch.Tensor, index: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``src[index]`` (both 1-D, ``src`` contiguous) cast to ``dtype``."""
    if src.dim() != 1 or index.dim() != 1 or not src.is_contiguous() or not index.is_contiguous():
        raise ValueError(f"gather_cast wants 1-D contiguous tensors, got {tuple(src.shape)} / {tuple(index.shape)}")
    if not runs_fused(src) or index.device != src.device:
        return src.index_select(0, index).to(dtype)
    out = torch.empty(index.numel(), device=src.device, dtype=dtype)
    n = index.numel()
    # bf16 <-> float32 as bit arithmetic: the GPU's conversions give the same bits, but Triton's CPU interpreter
    # truncates float32 -> bf16 and flushes bf16 subnormals to zero, and CI checks this kernel bit for bit there.
    to_bf16 = src.dtype == torch.float32 and dtype == torch.bfloat16
    from_bf16 = src.dtype == torch.bfloat16 and dtype == torch.float32
    if n:
        block = INTERPRETER_BLOCK if interpreting() else BLOCK
        _gather_cast_kernel[(triton.cdiv(n, block),)](
            src.view(torch.int16) if from_bf16 else src, index, out.view(torch.int16) if to_bf16 else out, n,
            ROUND_BF16=to_bf16, WIDEN_BF16=from_bf16, BLOCK=block, num_warps=8)
    return out


if triton is not None:

    @triton.jit(do_not_specialize=["n"])
    def _gather_cast_kernel(src_ptr, index_ptr, out_ptr, n, ROUND_BF16: tl.constexpr, WIDEN_BF16: tl.constexpr,
                            BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        at = tl.load(index_ptr + offs, mask=inside, other=0)
        value = tl.load(src_ptr + at, mask=inside)
        if ROUND_BF16:  # float32 -> bf16 bits, to nearest even; NaN stays NaN (quieted), not carried into the sign
            bits = value.to(tl.int32, bitcast=True)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            nan = (bits & 0x7FFFFFFF) > 0x7F800000
            tl.store(out_ptr + offs, tl.where(nan, (bits >> 16) | 0x40, rounded).to(tl.int16), mask=inside)
        elif WIDEN_BF16:  # bf16 bits (int16) -> float32: the upper half of the word, subnormals kept
            tl.store(out_ptr + offs, (value.to(tl.int32) << 16).to(tl.float32, bitcast=True), mask=inside)
        else:
            tl.store(out_ptr + offs, value.to(out_ptr.dtype.element_ty), mask=inside)
