"""The training step's conv1 weight gradient (``small_conv._small_conv_wgrad_kernel``, FLAT with a second gradient
and SELU) alone: its op's graphed time, the bytes it reads and the rate, and a few launches inside an NVTX range
"measured" for Nsight Compute (``benchmarks/gpu_small_conv_wgrad_ncu.sh``).

The call is recorded from one eager fused bf16 training step at batch 128 (``bench_bwd_tiles.record_calls``), so
its tensors have the step's shapes, strides and dtypes. Prints the inputs' layouts too (the patches' gather depends
on x's). Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/small_conv_wgrad_alone.py
"""
from __future__ import annotations

import torch

from bench_bwd_tiles import _graphed, record_calls  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv_layers import median_event_ms  # noqa: E402


def _layout(name: str, t: torch.Tensor) -> str:
    return f"{name} {tuple(t.shape)} strides {t.stride()} {t.dtype}"


def main() -> None:
    calls = [args for kind, op, args in record_calls() if kind == "small_conv" and args[1].shape[1] == 3]
    dout, x, weight, out, selu, need_dx, dout2 = calls[0]
    from mscred.ops.triton import small_conv
    op = small_conv.small_conv_fused_backward
    print("; ".join(_layout(n, t) for n, t in (("dout", dout), ("x", x), ("out", out), ("dout2", dout2))))
    nbytes = sum(t.numel() * t.element_size() for t in (dout, dout2, out, x))
    op(*calls[0])
    ms = median_event_ms(_graphed(op, calls[0]).replay, iters=20)
    print(f"op graphed: {ms * 1000:.1f} us for {nbytes / 1e6:.1f} MB of inputs read "
          f"({nbytes / ms / 1e9:.2f} TB/s)")
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("measured"):
        for _ in range(3):
            op(*calls[0])
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
