"""What the Triton ops share: the optional import of Triton, and where their kernels can run.

The kernels run on CUDA tensors, or on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``: CI checks
them that way); elsewhere each op falls back to its PyTorch reference. ``triton`` and ``tl`` are None when Triton
is not installed, so the modules guard their ``@triton.jit`` definitions with ``if triton is not None``.
"""
from __future__ import annotations

import os
from typing import Optional

import torch

# Shared memory one block may ask for on the H100/H200 (sm_90): the limit the tile plans budget for off CUDA (the
# interpreter), and the one tests/sm90_compile.py holds the compiled kernels to.
HOPPER_SHARED_MEMORY = 227 * 1024

try:
    import triton
    import triton.language as tl
except ImportError as _err:  # pragma: no cover
    triton = None
    tl = None
    IMPORT_ERROR: Optional[Exception] = _err
else:
    IMPORT_ERROR = None


def interpreting() -> bool:
    """Whether Triton's CPU interpreter is on (read at call time: tests set it before the first kernel runs)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def is_available(what: str) -> tuple[bool, str]:
    """(True, "") when ``what`` (an op's name, for the message) can run its kernels here, else (False, why)."""
    if triton is None:
        return False, f"triton not importable ({IMPORT_ERROR})"
    if torch.cuda.is_available() or interpreting():
        return True, ""
    return False, "no CUDA device (set TRITON_INTERPRET=1 to run the kernels on the CPU interpreter)"


def runs_fused(t: torch.Tensor) -> bool:
    """Whether an op on ``t`` runs the Triton kernels (CUDA, or CPU under the interpreter) or its reference."""
    return triton is not None and (t.is_cuda or (interpreting() and t.device.type == "cpu"))


def tile_override(variable: str, default: tuple[int, ...],
                  names: tuple[str, ...] = ("BLOCK", "warps", "tiles")) -> tuple[int, ...]:
    """A kernel's launch numbers -- by default (elements per program, warps), or with a third, tiles per program;
    ``names`` says what they are for the error message --: ``default``, or the environment variable's
    "BLOCK/warps[/tiles]" with as many numbers as ``default`` (A/B runs against an earlier tile; "/" because the
    device scripts pass variables as comma-separated lists)."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    form = "/".join(names[:len(default)])
    try:
        values = tuple(int(v) for v in text.split("/"))
    except ValueError:
        values = ()
    if len(values) != len(default):
        example = "/".join(str(v) for v in default)
        raise ValueError(f"{variable} must be {form}, e.g. {example}, got {text!r}")
    return values


def sm_count(device: torch.device | int | None = None) -> int:
    """Streaming multiprocessors of a CUDA device (the current one by default): the kernels' grid sizing."""
    if device is None:
        device = torch.cuda.current_device()
    return torch.cuda.get_device_properties(device).multi_processor_count


def switched_off(variable: str) -> bool:
    """Whether the environment variable of an A/B switch that is on by default says off (0, false, no, off)."""
    return os.environ.get(variable, "1").strip().lower() in ("0", "false", "no", "off")


def switched_on(variable: str) -> bool:
    """Whether the environment variable of an opt-in switch (off by default) says on (1, true, yes, on)."""
    return os.environ.get(variable, "0").strip().lower() in ("1", "true", "yes", "on")
