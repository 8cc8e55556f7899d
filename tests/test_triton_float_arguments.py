"""A Triton kernel's Python float argument arrives as float32, compiled or (through conftest.py) interpreted.

Compiled kernels type a Python float argument as fp32; Triton's CPU interpreter would keep it a Python float and
compute with it in float64. conftest.py rounds such arguments to float32 under the interpreter, so that CI sees what
the GPU sees (the fused attention's float64 path once lost accuracy to a 1/T argument on the H200 and passed under
the interpreter: results/gpu_full_suite/). This test pins both halves: the rounding, and that it reaches kernels.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mscred.ops.triton.runtime import interpreting, tl, triton

pytestmark = pytest.mark.skipif(triton is None or not (torch.cuda.is_available() or interpreting()),
                                reason="needs Triton with a CUDA device or its CPU interpreter")

if triton is not None:
    @triton.jit
    def _store_scalar(out_ptr, value):
        tl.store(out_ptr + tl.arange(0, 1), tl.zeros((1,), dtype=tl.float64) + value)


def test_float_argument_is_float32_in_the_kernel():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = torch.zeros(1, dtype=torch.float64, device=device)
    _store_scalar[(1,)](out, 0.2)
    assert out.item() == float(np.float32(0.2)) != 0.2
