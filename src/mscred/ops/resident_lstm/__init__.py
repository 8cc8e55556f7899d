"""Inference through a ConvLSTM level with each window's whole state on the SM: ``window_lstm_resident``.

A CUDA C++ kernel (``resident_lstm.cu``; its header comment has the design): a persistent block per SM takes window
after window and keeps the recurrent weight and the window's h_{t-1} / h_t maps in shared memory and its cell state
in registers, so that only the input gates come in and h goes out, with the recurrent convolution on mma.sync bf16
tensor cores and the cell update in its epilogue. It serves bf16 inference (the graphed scoring path) of the 2 x 2
ConvLSTM levels of 32 channels up to 32 x 32 pixels and 64 channels up to 16 x 16 (levels 1 and 2 of the default
model at up to 32 sensors); elsewhere the Triton per-window kernel (``ops/triton/convlstm_window.py``) or the
per-step path runs. ``MSCRED_RESIDENT_LSTM=0`` turns it off (A/B runs); ``MSCRED_RESIDENT_LSTM_FLAGS`` builds it
with other values of its compile-time switches (``-DMSCRED_RESIDENT_WARPS=12`` ...; benchmarks only).

Built on first use with ``torch.utils.cpp_extension.load`` for the present GPU (the im2col extension's target,
``mscred.ops.im2col.cuda_target``); if the build fails mscred warns once and the other paths run.
"""
from __future__ import annotations

import hashlib
import os
import threading
import warnings
from pathlib import Path
from typing import Optional

import torch

from mscred.ops.triton.runtime import switched_off

# Hidden channels -> the most pixels (H * W) a block takes: the kMaxPixels of resident_lstm.h.
MAX_PIXELS = {32: 1024, 64: 256}
KERNEL = 2  # the ConvLSTM kernel size it is written for (four taps)
_SRC = Path(__file__).resolve().parent

_ext = None
_ext_error: Optional[str] = None
_ext_lock = threading.Lock()


def _extension():
    """The compiled module (``forward``, ``shared_bytes``); raises RuntimeError if it cannot be built here."""
    global _ext, _ext_error
    with _ext_lock:
        if _ext is None and _ext_error is None:
            try:
                if not torch.cuda.is_available():
                    raise RuntimeError("no CUDA device")
                major, minor = torch.cuda.get_device_capability()
                if (major, minor) < (8, 0):
                    raise RuntimeError(f"needs compute capability >= 8.0 (bf16 mma.sync), device has {major}.{minor}")
                from torch.utils.cpp_extension import load

                from mscred.ops.im2col import cuda_target
                target_name, target = cuda_target(major, minor)
                # A/B builds of the kernel's switches (benchmarks): -D flags, in a module of their own name.
                flags = os.environ.get("MSCRED_RESIDENT_LSTM_FLAGS", "").split()
                suffix = f"_{hashlib.sha256(' '.join(flags).encode()).hexdigest()[:8]}" if flags else ""
                _ext = load(name=f"mscred_resident_lstm_{target_name}{suffix}",
                            sources=[str(_SRC / "binding.cpp"), str(_SRC / "resident_lstm.cu")],
                            extra_cflags=["-O3"], extra_cuda_cflags=["-O3", *target, *flags],
                            extra_include_paths=[str(_SRC)], verbose=False)
            except Exception as err:  # noqa: BLE001 - any build/load failure means "kernel unavailable"
                text = str(err).strip()
                _ext_error = f"{type(err).__name__}: {text.splitlines()[-1] if text else ''}"
                warnings.warn(f"mscred: the resident ConvLSTM kernel is unavailable ({_ext_error}); the Triton "
                              "kernels run instead", RuntimeWarning, stacklevel=3)
        if _ext is None:
            raise RuntimeError(f"resident ConvLSTM extension unavailable ({_ext_error})")
        return _ext


def takes(dtype: torch.dtype, layout: str, save: bool, ch: int, k: int, hw: int) -> bool:
    """Whether the kernel is written for this level: bf16 inference (``save`` False) on channels-last buffers, a
    2 x 2 kernel, 32 hidden channels with at most 1,024 pixels or 64 with at most 256; and not switched off."""
    return (dtype == torch.bfloat16 and layout == "nhwc" and not save and k == KERNEL
            and hw <= MAX_PIXELS.get(ch, 0) and not switched_off("MSCRED_RESIDENT_LSTM"))


def runs(dtype: torch.dtype, layout: str, save: bool, ch: int, k: int, hw: int, device: torch.device) -> bool:
    """``takes`` on a CUDA device where the extension builds (it is built here on first use)."""
    if device.type != "cuda" or not takes(dtype, layout, save, ch, k, hw):
        return False
    try:
        _extension()
    except RuntimeError:
        return False
    return True


def packed_weight(w_h: torch.Tensor) -> torch.Tensor:
    """The recurrent weight (4Ch, Ch, 2, 2) as the kernel's (4Ch, 4Ch): row n (gate column), column (ky * 2 + kx) * Ch
    + ci (a view of a channels-last weight)."""
    four_ch, ch = w_h.shape[:2]
    return w_h.permute(0, 2, 3, 1).reshape(four_ch, 4 * ch).contiguous()


def run(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, out: torch.Tensor, pads, forget_bias: float) -> None:
    """Every step of one level for every window into ``out`` (B, T, Ch, H, W), stored (B, T, H, W, Ch), from the
    input gates gx (B, T, 4Ch, H, W) (channels contiguous: a crop, or the sliding view of shared steps), the bias
    (added in float32) and the recurrent weight w_h (4Ch, Ch, 2, 2); TF "same" padding ``pads`` (top, bottom, left,
    right)."""
    _extension().forward(gx, bias.float().contiguous(), packed_weight(w_h), out, pads[0], pads[2], float(forget_bias))


def is_available() -> tuple[bool, str]:
    """Whether the kernel works here: builds the extension if needed and runs one small level (two windows of 3
    steps, 32 channels, 5 x 5, through the fused op as scoring calls it) against the float64 reference."""
    if not torch.cuda.is_available():
        return False, "no CUDA device (bf16 scoring of levels 1-2 takes the Triton kernels)"
    if not takes(torch.bfloat16, "nhwc", False, 32, KERNEL, 25):
        return False, "switched off (MSCRED_RESIDENT_LSTM=0)"
    try:
        _extension()
        from mscred.ops import reference
        from mscred.ops.triton import convlstm as fused
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 32, 5, 5, generator=g, dtype=torch.float64)
        w = torch.randn(128, 64, 2, 2, generator=g, dtype=torch.float64) / 16
        b = torch.randn(128, generator=g, dtype=torch.float64) * 0.5
        low = [t.cuda().to(torch.bfloat16) for t in (x, w, b)]
        with torch.no_grad():
            out = fused.convlstm_fused(*low, 1.0, "nhwc", False)[0]
        expect = reference.convlstm(x, w, b, 1.0)
        err = ((out.double().cpu() - expect).norm() / expect.norm()).item()
        if not err < 2e-2:
            return False, f"built, but a test level is off by {err:.3g} (relative)"
    except Exception as err:  # noqa: BLE001
        return False, str(err)
    return True, "CUDA kernel built"
