"""Test-session setup shared by every test file.

Triton decides at decoration time whether a ``@triton.jit`` kernel is compiled for the GPU or run by its CPU
interpreter (``TRITON_INTERPRET=1``). On a machine without CUDA (CI, the CPU dev boxes) we switch the interpreter on
here, before any test module imports ``mscred.ops.triton``, so that the fused kernels are still executed and checked
against the float64 reference on the CPU. On a CUDA machine nothing changes: the kernels compile for the GPU.
"""
from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """Every test runs torch on one thread: the models and kernels under test are tiny, and oneDNN's thread pool
    costs more than it gains at these sizes, far more when the CPU is shared (measured 0.14 s vs 4.1 s per training
    step on 2 busy cores). Spawned DDP ranks set their own thread counts."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def strict_float32():
    """float32 rows compare true float32 arithmetic: cuDNN's default TF32 would make both sides' error ~1e-3."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
