"""Tile sweep of the forward ConvLSTM cell kernel on the scoring path: each level's fused op alone, bf16 inference.

Each ConvLSTM level of the thesis workload's scoring call (3,591 sliding windows of 5 steps over 3,595 segments,
30 sensors, channels 32/64/128/256, kernel 2; per-step path, MSCRED_WINDOW_LSTM=0) is timed as a whole (input
convolution once per segment, recurrent convolutions, cell kernels) while the cell kernel's elements per program
(``convlstm.BLOCK``), channels per tile row (``MAX_BLOCK_C``) and warps (``NUM_WARPS``) vary: only the cell
kernel changes between rows. CUDA-event medians of 30 calls after 5 warm-ups; outputs checked equal to the
defaults' (the tile does not change the arithmetic).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_cell_blocks.py [--out DIR]
Writes DIR/cell_blocks.md and DIR/cell_blocks.json.
"""
from __future__ import annotations

import argparse
import itertools
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv_layers import median_event_ms  # noqa: E402

LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
WINDOWS, STEPS = 3591, 5
BLOCKS = (512, 1024, 2048, 4096)
BLOCK_CS = (32, 64)
WARPS = (4, 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/cell_blocks")
    args = ap.parse_args()
    from mscred.ops.triton import convlstm as fused
    os.environ["MSCRED_WINDOW_LSTM"] = "0"
    defaults = (fused.BLOCK, fused.MAX_BLOCK_C, fused.NUM_WARPS)
    torch.manual_seed(0)
    rows = []
    for ch, n in LEVELS:
        seg = torch.randn(WINDOWS + STEPS - 1, ch, n, n, device="cuda", dtype=torch.bfloat16)
        seg = seg.contiguous(memory_format=torch.channels_last)
        x = seg.as_strided((WINDOWS, STEPS, ch, n, n), (seg.stride(0), *seg.stride()))  # sliding windows, no copy
        w = torch.randn(4 * ch, 2 * ch, 2, 2, device="cuda", dtype=torch.bfloat16) / (2 * (2 * ch) ** 0.5)
        b = torch.randn(4 * ch, device="cuda", dtype=torch.bfloat16) * 0.5

        def run():
            with torch.no_grad():
                return fused.convlstm(x, w, b, 1.0)
        ref = run().float()
        for block, block_c, warps in itertools.product(BLOCKS, BLOCK_CS, WARPS):
            if block_c > ch:
                continue
            fused.BLOCK, fused.MAX_BLOCK_C, fused.NUM_WARPS = block, block_c, warps
            same = torch.equal(run().float(), ref)
            ms = median_event_ms(run)
            row = dict(channels=ch, size=n, block=block, block_c=block_c, warps=warps, ms=ms, same=same)
            rows.append(row)
            print(row, flush=True)
        fused.BLOCK, fused.MAX_BLOCK_C, fused.NUM_WARPS = defaults
    meta = (f"{sweep_report.machine_line()}. Defaults: BLOCK {defaults[0]}, MAX_BLOCK_C {defaults[1]}, NUM_WARPS "
            f"{defaults[2]}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_cell_blocks.py`.")
    lines = ["# Forward cell kernel tiles on the scoring path (one ConvLSTM level of 3,591 windows, bf16 inference)",
             "", meta, "",
             "| level (channels, size) | BLOCK | BLOCK_C | warps | ms per level | vs defaults | same output |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ch = r["channels"]
        default_tile = (defaults[0], min(defaults[1], ch), defaults[2])  # what _launch makes of the defaults
        base = next(q["ms"] for q in rows
                    if q["channels"] == ch and (q["block"], q["block_c"], q["warps"]) == default_tile)
        lines.append(f"| {ch}, {r['size']} | {r['block']} | {r['block_c']} | {r['warps']} | {r['ms']:.3f} | "
                     f"{base / r['ms']:.2f}x | {r['same']} |")
    sweep_report.write(args.out, "cell_blocks", meta, rows, lines)


if __name__ == "__main__":
    main()
