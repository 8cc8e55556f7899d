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


def _bf16_arithmetic_as_compiled() -> None:
    """The interpreter keeps bfloat16 values as their uint16 bit patterns and hands those to numpy as they are: a
    bf16 ``tl.dot`` multiplies bit patterns (its matmul converts only 8-bit float operands), and so do its float
    binary and unary operators (a bf16 + bf16 adds two integers) -- values of ~1e10 where the GPU gives numbers
    (triton-lang/triton#11584; the fix, #11585, was declined: the interpreter does not support bf16). Every bf16
    model run under the interpreter went through such values -- conv1's and deconv1's small convolutions, conv1's
    two gradients summed in bf16 -- so a test comparing two such runs compared garbage with garbage.

    Here bf16 operands become float32 first, exactly (the interpreter's own bf16 -> float32 cast), as the GPU does:
    ``tl.dot`` then accumulates in float32 as the tensor cores do, and an elementwise result is rounded back to bf16
    as a bf16 instruction rounds its float32 result (comparisons give their booleans). That rounding, and every
    float32 -> bf16 conversion (a ``.to``, a store into bf16), is round-to-nearest-even, as the GPU's cvt.rn and
    torch's: the interpreter's own cast truncated (its rounding mode left at None), and its "RTNE" rounds ties up
    and drops a carry into the exponent. Patches Triton's interpreter, if it has the hooks this expects."""
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    builder = getattr(interpreter, "InterpreterBuilder", None)
    hooks = ("create_dot", "binary_op", "unary_op", "cast_impl", "create_fp_to_fp")
    if builder is None or not all(hasattr(builder, h) for h in hooks) or not hasattr(interpreter, "TensorHandle"):
        return
    dot, binary, unary, interpreter_cast, to_fp = (getattr(builder, h) for h in hooks)

    def is_bf16(handle) -> bool:
        return getattr(handle.dtype, "scalar", None) == tl.bfloat16

    def to_bf16_nearest_even(handle):
        """float32 -> bf16, round to nearest, ties to even: add 0x7FFF plus the kept half's lowest bit, keep the
        upper 16 bits (a carry into the exponent is the right rounding); NaN stays a quiet NaN."""
        bits = np.ascontiguousarray(handle.data, dtype=np.float32).view(np.uint32)
        rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
        rounded = np.where(np.isnan(handle.data), np.uint16(0x7FC0), rounded)
        return interpreter.TensorHandle(rounded, tl.bfloat16)

    def cast(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return to_bf16_nearest_even(src)
        return interpreter_cast(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if (src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16
                and rounding_mode != interpreter._ir.ROUNDING_MODE.RTZ):
            return to_bf16_nearest_even(src)
        return to_fp(self, src, dst_type, rounding_mode)

    def widened(self, handle):
        return cast(self, handle, tl.float32) if is_bf16(handle) else handle

    def rounded(self, handle):
        return handle if handle.data.dtype == bool else cast(self, handle, tl.bfloat16)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widened(self, a), widened(self, b), d, input_precision, max_num_imprecise_acc)

    def binary_op(self, lhs, rhs, op):
        if not (is_bf16(lhs) and is_bf16(rhs)):
            return binary(self, lhs, rhs, op)
        return rounded(self, binary(self, widened(self, lhs), widened(self, rhs), op))

    def unary_op(self, arg, op):
        if not is_bf16(arg):
            return unary(self, arg, op)
        return rounded(self, unary(self, widened(self, arg), op))

    builder.create_dot, builder.binary_op, builder.unary_op = create_dot, binary_op, unary_op
    builder.cast_impl, builder.create_fp_to_fp = cast, create_fp_to_fp


if os.environ.get("TRITON_INTERPRET") == "1":
    _float_arguments_as_compiled()
    _bf16_arithmetic_as_compiled()


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
