"""Test-session setup shared by every test file.

Triton decides at decoration time whether a ``@triton.jit`` kernel is compiled for the GPU or run by its CPU
interpreter (``TRITON_INTERPRET=1``). On a machine without CUDA (CI, the CPU dev boxes) we switch the interpreter on
here, before any test module imports ``mscred.ops.triton``, so that the fused kernels are still executed and checked
against the float64 reference on the CPU. On a CUDA machine nothing changes: the kernels compile for the GPU.
"""
from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
