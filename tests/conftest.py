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


def _float_arguments_as_compiled() -> None:
    """Under the interpreter a kernel's Python float argument stays a Python float, so arithmetic with it is done in
    float64; a compiled kernel receives it as float32. Hand it to the interpreted kernels rounded to float32 too, so
    that a float64 path which needs a float argument's digits fails here as it fails on the GPU (one did: the fused
    attention's 1/T, results/gpu_full_suite/). Patches Triton's interpreter, if it has the hook this expects."""
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    original = getattr(interpreter, "_implicit_cvt", None)
    if original is None or not hasattr(interpreter, "TensorHandle"):
        return

    def convert(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return original(arg)

    interpreter._implicit_cvt = convert


if os.environ.get("TRITON_INTERPRET") == "1":
    _float_arguments_as_compiled()


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


@pytest.fixture
def set_env(monkeypatch):
    """``set_env(name, value)``: the environment variable set to ``value`` for the test, or unset when None (a
    switch's default)."""
    def set_or_unset(name: str, value):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return set_or_unset
