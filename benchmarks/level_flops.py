"""The convolution arithmetic of each ConvLSTM level of the training step, by FlopCounterMode (CPU, meta tensors).

For each level of the default model at the training batch (128 windows of 5 steps, channels 32/64/128/256 at
30/15/8/4 pixels, kernel 2): the reference ConvLSTM's forward and backward (gradients of x, weight and bias) on meta
tensors, counted by ``torch.utils.flop_counter.FlopCounterMode`` (convolutions only: its elementwise work is not
counted). The reference convolves concat([x_t, h_{t-1}]) at every step, the recurrent half at step 1 with h = 0
too; the fused op skips that half (1 of the 10 half-convolutions of the forward), so its count is ~5% lower. With
the measured bf16 matrix rate (``--tflops``, bench_train.py's ceiling: 812 on the H200) each level's floor in ms.

Usage: PYTHONPATH=src python3 benchmarks/level_flops.py [--tflops 812] [--out DIR]   (no GPU needed, ~1 s)
Writes DIR/level_flops.md.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from mscred.ops import reference

LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
BATCH, STEPS, KERNEL = 128, 5, 2


def level_flops(ch: int, n: int) -> tuple[int, int]:
    """(forward, backward) FLOPs of one level's reference ConvLSTM at the training batch."""
    meta = dict(device="meta", requires_grad=True)
    x = torch.empty(BATCH, STEPS, ch, n, n, **meta)
    w = torch.empty(4 * ch, 2 * ch, KERNEL, KERNEL, **meta)
    b = torch.empty(4 * ch, **meta)
    with FlopCounterMode(display=False) as forward:
        y = reference.convlstm(x, w, b, 1.0)
    with FlopCounterMode(display=False) as backward:
        torch.autograd.grad(y, (x, w, b), torch.empty_like(y))
    return forward.get_total_flops(), backward.get_total_flops()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tflops", type=float, default=812.0, help="matrix rate for the floor column (TFLOP/s)")
    ap.add_argument("--out", default="benchmarks/results/level_flops")
    args = ap.parse_args()
    lines = ["# Convolution arithmetic per ConvLSTM level of the training step (reference op, FlopCounterMode)", "",
             f"Batch {BATCH}, {STEPS} steps, kernel {KERNEL}; floor at {args.tflops:g} TFLOP/s. Command: "
             "`PYTHONPATH=src python3 benchmarks/level_flops.py`.", "",
             "| level (channels, size) | forward GFLOP | backward GFLOP | total GFLOP | floor ms |",
             "| --- | --- | --- | --- | --- |"]
    total = 0
    for ch, n in LEVELS:
        fwd, bwd = level_flops(ch, n)
        total += fwd + bwd
        lines.append(f"| {ch}, {n} | {fwd / 1e9:.1f} | {bwd / 1e9:.1f} | {(fwd + bwd) / 1e9:.1f} | "
                     f"{(fwd + bwd) / args.tflops / 1e9:.3f} |")
    lines.append(f"| all four | | | {total / 1e9:.1f} | {total / args.tflops / 1e9:.3f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "level_flops.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
