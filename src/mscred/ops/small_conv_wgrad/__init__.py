"""conv1's weight gradient in CUDA C++ (``small_conv_wgrad.cu``; its header comment has the design): the encoder's
3 -> 32 channel, 3 x 3 convolution with SELU, whose weight gradient runs alone at the very end of the training
step's backward. The Triton kernel it replaces there (``ops/triton/small_conv.py``) is bound by its issue slots
(results/small_conv_wgrad_stalls/); this one has a thread per pixel, 16-byte loads of the gradients and mma.sync.

It takes bf16 conv1 calls (3 input channels, a 3 x 3 kernel, output channels a multiple of 8 up to 32) whose
gradients and output have contiguous channels, strides in multiples of 8 elements and 16-byte aligned data (the
training encoder's bordered buffers); elsewhere the Triton kernel runs. ``MSCRED_SMALL_CONV_WGRAD_CUDA=0`` turns it
off (A/B runs). Built on first use for the present GPU (``ops/cuda_extension.py``); if the build fails mscred warns
once and the Triton kernel runs.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import torch

from mscred.ops.cuda_extension import LazyExtension
from mscred.ops.triton.runtime import switched_off

CI, KS, MAX_CO = 3, 3, 32  # small_conv_wgrad.h: kCI, kKS, kMaxCO
_SRC = Path(__file__).resolve().parent
_extension = LazyExtension("conv1 weight-gradient extension", "mscred_small_conv_wgrad", _SRC,
                           ["binding.cpp", "small_conv_wgrad.cu"])


def vector_rows(t: Optional[torch.Tensor]) -> bool:
    """Whether the kernel reads ``t`` (N, C, H, W) 16 bytes at a time: bf16, channels contiguous, every other stride
    (of a dimension longer than 1) a multiple of 8 elements, 16-byte aligned data. None (no such input) passes."""
    if t is None:
        return True
    return (t.dtype == torch.bfloat16 and t.dim() == 4 and t.stride(1) == 1 and t.data_ptr() % 16 == 0
            and all(t.shape[d] == 1 or t.stride(d) % 8 == 0 for d in (0, 2, 3)))


def takes(x: torch.Tensor, weight_shape: tuple[int, ...], dout: torch.Tensor, dout2: Optional[torch.Tensor],
          out: Optional[torch.Tensor]) -> bool:
    """Whether the kernel is written for this call (see the module's docstring); does not build anything."""
    co, ci, kh, kw = weight_shape
    return (x.is_cuda and x.dtype == torch.bfloat16 and ci == CI and kh == kw == KS and co % 8 == 0
            and 0 < co <= MAX_CO and all(vector_rows(t) for t in (dout, dout2, out))
            and not switched_off("MSCRED_SMALL_CONV_WGRAD_CUDA"))


def runs(x: torch.Tensor, weight_shape: tuple[int, ...], dout: torch.Tensor, dout2: Optional[torch.Tensor],
         out: Optional[torch.Tensor]) -> bool:
    """``takes`` where the extension builds (here, on first use) for this device's architecture."""
    if not takes(x, weight_shape, dout, dout2, out):
        return False
    if not _extension.usable("conv1's weight gradient runs the Triton kernel"):
        return False
    return torch.cuda.get_device_capability(x.device) == _extension.capability


def weight_grad(x: torch.Tensor, dout: torch.Tensor, dout2: Optional[torch.Tensor],
                out: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(dW as the (27, CO) float32 matrix of ``small_conv._as_matrix``'s layout, dbias (CO,) float32) of conv1 for
    input ``x``, output gradient ``dout`` (+ ``dout2``, a second one, when given) and, with SELU, the forward's
    output ``out`` (SELU's derivative from it); None for either: absent."""
    co = dout.shape[1]
    dw = torch.empty(KS * KS * CI, co, device=x.device, dtype=torch.float32)
    db = torch.empty(co, device=x.device, dtype=torch.float32)
    none = dout.new_empty(0)
    blocks = int(os.environ.get("MSCRED_SMALL_CONV_WGRAD_CUDA_BLOCKS", "0"))  # blocks an SM (A/B runs; 0: 4)
    _extension().wgrad(x, dout, none if dout2 is None else dout2, none if out is None else out, dw, db, blocks)
    return dw, db
