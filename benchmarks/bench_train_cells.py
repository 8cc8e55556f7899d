"""The training path's cell kernels per ConvLSTM level: tiles, warps and the cell state's storage type.

Each level of the default model at the training batch (128 windows of 5 steps, bf16, channels-last, channels
32/64/128/256 at 30/15/8/4 pixels, kernel 2): its forward (saving the backward's state) and its backward, each
captured in a CUDA graph and timed by replays (CUDA events, median of 30 after 5 warm-ups), so that the rows
compare GPU time, not Python launch overhead. Between rows only the cell kernels change: elements per program
(``BLOCK``; the backward's tile at the levels of ``convlstm.BWD_TILES`` is that table's since 2026-12-01, swept by
bench_cell_bwd_tiles.py), warps of the forward / backward kernel (``NUM_WARPS`` / ``NUM_WARPS_BWD``), and the stored cell
state (float16, the default for bf16; float32 with MSCRED_LSTM_HALF_CELL_TRAIN=0). Each row's gradients (dx, dW,
dbias) are compared with the level's first row's (float16 cells, BLOCK 512, 4 / 4 warps): the largest relative
difference, 0 where only the tiling changed (bias-gradient atomics aside), bf16-rounding-sized across cell types.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_train_cells.py [--out DIR]
Writes DIR/train_cells.md and DIR/train_cells.json.
"""
from __future__ import annotations

import argparse
import itertools
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv import capture  # noqa: E402

LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
BATCH, STEPS = 128, 5
BLOCKS = (512, 1024, 2048)
WARPS = (4, 8)
CELLS = ("float16", "float32")


def level_inputs(ch: int, n: int, batch: int = BATCH, steps: int = STEPS, device: str = "cuda"):
    """One level's training-call inputs, seeded by ``ch``: x (B, T, C, H, W) stored time-major and channels-last
    per step as the encoder hands it in training (bf16), the weight (bf16, kernel 2), the bias (float32 master, as
    under autocast), and an output gradient in the op's storage order; the training batch on CUDA by default.
    profile_train_step.py's per-level profiles and bench_cell_math.py use it too (``fused.train_inputs`` makes the
    op's inputs)."""
    g = torch.Generator(device=device).manual_seed(ch)
    bf = torch.bfloat16
    x = torch.randn(steps, batch, n, n, ch, device=device, dtype=bf, generator=g).permute(1, 0, 4, 2, 3)
    w = torch.randn(4 * ch, 2 * ch, 2, 2, device=device, dtype=bf, generator=g) / (2 * (2 * ch) ** 0.5)
    b = torch.randn(4 * ch, device=device, generator=g) * 0.5
    dout = torch.randn(batch, steps, n, n, ch, device=device, dtype=bf, generator=g).permute(0, 1, 4, 2, 3)
    return x, w, b, dout


def graph_ms(fn, iters: int = 30) -> float:
    """Median ms of one replay of ``fn`` captured in a CUDA graph (``bench_conv.capture``), L2 left warm between
    replays (``bench_conv.bench_graphed`` flushes it)."""
    g = capture(fn)
    for _ in range(5):
        g.replay()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/train_cells")
    args = ap.parse_args()
    from mscred.ops.triton import convlstm as fused

    defaults = (fused.BLOCK, fused.NUM_WARPS, fused.NUM_WARPS_BWD)
    rows = []
    for ch, n in LEVELS:
        x, w, b, dout = level_inputs(ch, n)
        xp, w_x, w_h = fused.train_inputs(x, w)
        ref = None
        for cells, block, warps, warps_bwd in itertools.product(CELLS, BLOCKS, WARPS, WARPS):
            os.environ["MSCRED_LSTM_HALF_CELL_TRAIN"] = "1" if cells == "float16" else "0"
            fused.BLOCK, fused.NUM_WARPS, fused.NUM_WARPS_BWD = block, warps, warps_bwd
            state = fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")

            def forward():
                return fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")

            def backward():
                return fused.convlstm_train_backward(dout, xp, w_x, w_h, b, *state[1:], 1.0, "nhwc")

            grads = [t.float() for t in backward()]
            if ref is None:
                ref = grads
            diff = max(((a - r).norm() / r.norm()).item() for a, r in zip(grads, ref))
            row = dict(channels=ch, size=n, cells=cells, block=block, warps=warps, warps_bwd=warps_bwd,
                       forward_ms=graph_ms(forward), backward_ms=graph_ms(backward), grad_rel_diff=diff)
            rows.append(row)
            print(row, flush=True)
        fused.BLOCK, fused.NUM_WARPS, fused.NUM_WARPS_BWD = defaults
        os.environ.pop("MSCRED_LSTM_HALF_CELL_TRAIN")
    meta = (f"{sweep_report.machine_line()}. Batch {BATCH}, {STEPS} steps, bf16, kernel 2, CUDA-graph replays. "
            f"Defaults: BLOCK {defaults[0]}, NUM_WARPS {defaults[1]}, NUM_WARPS_BWD {defaults[2]}, float16 cells. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_train_cells.py`.")
    lines = ["# The training path's cell kernels per ConvLSTM level (batch 128, bf16, graph replays)", "", meta, "",
             "| level (channels, size) | cells | BLOCK | warps fwd | warps bwd | forward ms | backward ms | "
             "fwd + bwd vs defaults | grad rel. diff |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q for q in rows if q["channels"] == r["channels"] and q["cells"] == "float16"
                    and (q["block"], q["warps"], q["warps_bwd"]) == defaults)
        both = r["forward_ms"] + r["backward_ms"]
        lines.append(f"| {r['channels']}, {r['size']} | {r['cells']} | {r['block']} | {r['warps']} | {r['warps_bwd']} "
                     f"| {r['forward_ms']:.3f} | {r['backward_ms']:.3f} | "
                     f"{(base['forward_ms'] + base['backward_ms']) / both:.2f}x | {r['grad_rel_diff']:.1e} |")
    sweep_report.write(args.out, "train_cells", meta, rows, lines)


if __name__ == "__main__":
    main()
