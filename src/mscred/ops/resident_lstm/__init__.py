"""Inference through a ConvLSTM level with each window's whole state on the SM: ``window_lstm_resident``.

A CUDA C++ kernel (``resident_lstm.cu``; its header comment has the design): a persistent block per SM takes window
after window and keeps the recurrent weight, the window's h_{t-1} / h_t maps and its float16 cell state in shared
memory, so that only the input gates come in and h goes out, with the recurrent convolution on mma.sync bf16
tensor cores and the cell update in its epilogue. It serves bf16 inference (the graphed scoring path) of the 2 x 2
ConvLSTM levels of 32 channels up to 32 x 32 pixels and 64 channels up to 16 x 16 (levels 1 and 2 of the default
model at up to 32 sensors); elsewhere the Triton per-window kernel (``ops/triton/convlstm_window.py``) or the
per-step path runs. ``run_attention`` has the same kernel finish each window's temporal attention too (the model's
path, ``ops/lstm_attention.py``). ``MSCRED_RESIDENT_LSTM=0`` turns it off (A/B runs); ``MSCRED_RESIDENT_LSTM_FLAGS``
builds it with other values of its compile-time switches (``-DMSCRED_RESIDENT_WARPS=12`` ...; benchmarks only).

Built on first use for the present GPU (``ops/cuda_extension.py``, as the im2col extension); if the build fails
mscred warns once and the other paths run. The op's fake (meta) function asks ``runs`` too, so a first
``torch.compile`` trace of bf16 inference may be where the build happens.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from mscred.ops.cuda_extension import LazyExtension
# The opt-in shared memory of a block on a device, as the Triton per-window kernel plans with it (one reading).
from mscred.ops.triton.convlstm_window import shared_limit
from mscred.ops.triton.runtime import switched_off

# Hidden channels -> the most pixels (H * W) a block takes: the kMaxPixels of resident_lstm.h.
MAX_PIXELS = {32: 1024, 64: 256}
MAX_ATTENTION_STEPS = 5  # the most steps of the fused attention (run_attention): kMaxAttentionSteps
KERNEL = 2  # the ConvLSTM kernel size it is written for (four taps)
_SRC = Path(__file__).resolve().parent


def _build_flags() -> tuple[list[str], str]:
    """A/B builds of the kernel's compile-time switches (benchmarks): -D flags from MSCRED_RESIDENT_LSTM_FLAGS, in a
    module of their own name."""
    flags = os.environ.get("MSCRED_RESIDENT_LSTM_FLAGS", "").split()
    return flags, f"_{hashlib.sha256(' '.join(flags).encode()).hexdigest()[:8]}" if flags else ""


_extension = LazyExtension("resident ConvLSTM extension", "mscred_resident_lstm", _SRC,
                           ["binding.cpp", "resident_lstm.cu"], _build_flags)


def takes(dtype: torch.dtype, layout: str, save: bool, ch: int, k: int, hw: int) -> bool:
    """Whether the kernel is written for this level: bf16 inference (``save`` False) on channels-last buffers, a
    2 x 2 kernel, 32 hidden channels with at most 1,024 pixels or 64 with at most 256; and not switched off."""
    return (dtype == torch.bfloat16 and layout == "nhwc" and not save and k == KERNEL
            and hw <= MAX_PIXELS.get(ch, 0) and not switched_off("MSCRED_RESIDENT_LSTM"))


def runs(dtype: torch.dtype, layout: str, save: bool, ch: int, k: int, hw: int, device: torch.device) -> bool:
    """``takes`` on a CUDA device where the extension builds (it is built here on first use), for that device's
    architecture (a host of mixed GPUs keeps the Triton kernels on the others), and where the block's shared
    memory fits (``fits``: an A100 takes smaller maps than an H100/H200, an RTX A6000 / 4090 smaller still)."""
    if device.type != "cuda" or not takes(dtype, layout, save, ch, k, hw):
        return False
    if not _extension.usable("the Triton kernels run instead"):
        return False
    return torch.cuda.get_device_capability(device) == _extension.capability and fits(ch, hw, device)


def fits(ch: int, hw: int, device: torch.device) -> bool:
    """Whether a block for ``ch`` channels and ``hw`` pixels fits the shared memory a block may opt into on
    ``device`` (227 KB on the H100/H200, 163 KB on the A100, 99 KB on sm_86/89); the extension must be built."""
    return _extension().shared_bytes(ch, hw) <= shared_limit(device)


def packed_weight(w_h: torch.Tensor) -> torch.Tensor:
    """The recurrent weight (4Ch, Ch, 2, 2) as the kernel's (4Ch, 4Ch): row n (gate column), column (ky * 2 + kx) * Ch
    + ci (a view of a channels-last weight)."""
    four_ch, ch = w_h.shape[:2]
    return w_h.permute(0, 2, 3, 1).reshape(four_ch, 4 * ch).contiguous()


def run(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, out: torch.Tensor, pads, forget_bias: float) -> None:
    """Every step of one level for every window into ``out`` (B, T, Ch, H, W), stored (B, T, H, W, Ch), from the
    input gates gx (B, T, 4Ch, H, W) (channels contiguous: a crop, or the sliding view of shared steps), the bias
    (added in float32) and the recurrent weight w_h (4Ch, Ch, 2, 2); TF "same" padding ``pads`` (top, bottom, left,
    right). The binding refuses gates it cannot read 16 bytes at a time (channels not contiguous, other strides not
    multiples of 8, data not 16-byte aligned); ``step_gates``' views, whose strides are multiples of 4Ch, never are.
    """
    _extension().forward(gx, bias.float().contiguous(), packed_weight(w_h), out, pads[0], pads[2], float(forget_bias))


def run_attention(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, out: torch.Tensor, pads,
                  forget_bias: float) -> None:
    """``run``'s level with its temporal attention finished in the same kernel: each window's attention output
    into ``out`` (B, Ch, H, W) (``attention_output_fits``) instead of every h_t; at most MAX_ATTENTION_STEPS steps.
    """
    _extension().forward_attention(gx, bias.float().contiguous(), packed_weight(w_h), out, pads[0], pads[2],
                                   float(forget_bias))


def attention_output_fits(out: torch.Tensor) -> bool:
    """Whether the kernel writes its attention output into ``out`` (B, Ch, H, W) as it is: bf16, channels
    contiguous, the pixels at one stride, apart by at least Ch (a channel slice of a channels-last buffer, as the
    decoder's concatenation buffer), 16-byte stores (strides in multiples of 8, aligned data)."""
    B, Ch, H, W = out.shape
    pixel = out.stride(3)
    return (out.dtype == torch.bfloat16 and out.stride(1) == 1 and (H == 1 or out.stride(2) == W * pixel)
            and (H * W == 1 or (pixel % 8 == 0 and pixel >= Ch)) and (B == 1 or out.stride(0) % 8 == 0)
            and out.data_ptr() % 16 == 0)


def is_available() -> tuple[bool, str]:
    """Whether the kernel works here: builds the extension if needed and runs one small level (two windows of 3
    steps, 32 channels, 5 x 5, through the fused op as scoring calls it), and the same level with its attention
    finished in the kernel (``ops.lstm_attention``), against the float64 reference."""
    if not torch.cuda.is_available():
        return False, "no CUDA device (bf16 scoring of levels 1-2 takes the Triton kernels)"
    if not takes(torch.bfloat16, "nhwc", False, 32, KERNEL, 25):
        return False, "switched off (MSCRED_RESIDENT_LSTM=0)"
    device = torch.device("cuda", torch.cuda.current_device())
    try:
        _extension()
        if not runs(torch.bfloat16, "nhwc", False, 32, KERNEL, 25, device):  # so that the check below is its own
            return False, (f"built for compute capability {_extension.capability}, this device has "
                           f"{torch.cuda.get_device_capability(device)}")
        from mscred.ops import reference
        from mscred.ops.triton import convlstm as fused
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 32, 5, 5, generator=g, dtype=torch.float64)
        w = torch.randn(128, 64, 2, 2, generator=g, dtype=torch.float64) / 16
        b = torch.randn(128, generator=g, dtype=torch.float64) * 0.5
        low = [t.cuda().to(torch.bfloat16) for t in (x, w, b)]
        from mscred.ops.lstm_attention import resident_attention  # here: lstm_attention imports this module
        with torch.no_grad():
            out = fused.convlstm_fused(*low, 1.0, "nhwc")[0]
            fused_attention = resident_attention(*low, 1.0)  # None where it declines (MSCRED_RESIDENT_ATTENTION=0)
        expect = reference.convlstm(x, w, b, 1.0)
        checks = [("a test level", out, expect)]
        if fused_attention is not None:
            checks.append(("its fused attention", fused_attention, reference.temporal_attention(expect)))
        for what, got, want in checks:
            err = ((got.double().cpu() - want).norm() / want.norm()).item()
            if not err < 2e-2:
                return False, f"built, but {what} is off by {err:.3g} (relative)"
    except Exception as err:  # noqa: BLE001
        return False, str(err)
    levels = ((1, 32, 900), (2, 64, 225))  # the default model's levels 1-2 at 30 sensors
    too_big = [f"level {level} needs {_extension().shared_bytes(ch, hw) // 1024} KB of shared memory per block, the "
               f"device allows {shared_limit(device) // 1024} KB"
               for level, ch, hw in levels if not fits(ch, hw, device)]
    if len(too_big) == len(levels):
        return False, f"built, but no level of the default model fits here at 30 sensors ({'; '.join(too_big)})"
    fit = (f"; at 30 sensors {'; '.join(too_big)}: the Triton kernels run that level" if too_big
           else "; levels 1 and 2 of the default model at 30 sensors fit")
    if fused_attention is not None:
        attention = "with the attention fused"
    elif switched_off("MSCRED_RESIDENT_ATTENTION"):
        attention = "the attention apart (MSCRED_RESIDENT_ATTENTION=0)"
    else:
        attention = "but the attention kernel declined the test level"
    return True, f"CUDA kernel built ({_extension().mma_kind()}), {attention}{fit}"
