"""The training backward cell kernel with several row tiles per program (``convlstm.bwd_tiles``), per level.

Each level of the default model at the training batch (128 windows of 5 steps, bf16, channels-last, time-major,
kernel 2): ``convlstm_train_backward`` captured in a CUDA graph and timed by replays (``bench_train_cells.graph_ms``)
for each (BLOCK, TILES) of ``VARIANTS``: BLOCK elements per tile, TILES row tiles per program, whose bias-gradient
column sums are reduced and added once per program (Nsight Compute had the per-tile sums bank-conflicted and the
kernel held to 31% occupancy by its registers, results/cell_ncu/). Each row's gradients are compared with the
first row's (the kernel as it was: the forward's BLOCK, one tile): dx, dW equal to rounding, dbias summed in another
order. The fastest variant per level goes to DIR/best_tiles.txt as an MSCRED_CELL_BWD_TILES value.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_cell_bwd_tiles.py [--out DIR]
Writes DIR/cell_bwd_tiles.md, DIR/cell_bwd_tiles.json and DIR/best_tiles.txt.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import LEVELS, graph_ms, level_inputs  # noqa: E402

VARIANTS = ((1024, 1), (512, 2), (512, 4), (1024, 2), (2048, 1), (256, 8))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/cell_bwd_tiles")
    args = ap.parse_args()
    from mscred.ops.triton import convlstm as fused

    rows, best = [], []
    for ch, n in LEVELS:
        x, w, b, dout = level_inputs(ch, n)
        xp, w_x, w_h = fused.train_inputs(x, w)
        state = fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")
        ref = None
        for block, tiles in VARIANTS:
            os.environ["MSCRED_CELL_BWD_TILES"] = f"*:{block}/{tiles}"

            def backward():
                return fused.convlstm_train_backward(dout, xp, w_x, w_h, b, *state[1:], 1.0, "nhwc")

            grads = [t.float() for t in backward()]
            if ref is None:
                ref = grads
            diffs = [((a - r).norm() / r.norm()).item() for a, r in zip(grads, ref)]
            row = dict(channels=ch, size=n, block=block, tiles=tiles, backward_ms=graph_ms(backward),
                       rel_diff_dx_dw=max(diffs[:3]), rel_diff_dbias=diffs[3])
            rows.append(row)
            print(row, flush=True)
        level = [r for r in rows if r["channels"] == ch]
        fastest = min(level, key=lambda r: r["backward_ms"])
        best.append(f"{ch}:{fastest['block']}/{fastest['tiles']}")
    os.environ.pop("MSCRED_CELL_BWD_TILES", None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "best_tiles.txt").write_text(";".join(best) + "\n")
    meta = (f"{sweep_report.machine_line()}. Batch 128, 5 steps, bf16, kernel 2, CUDA-graph replays (median of 30) of "
            "the level's whole backward (cell kernels, recurrent data gradients, weight gradients). Command: "
            f"`PYTHONPATH=src python3 benchmarks/bench_cell_bwd_tiles.py`. Fastest: `MSCRED_CELL_BWD_TILES="
            f"{';'.join(best)}`.")
    lines = ["# The backward cell kernel's row tiles per program (batch 128, bf16, graph replays)", "", meta, "",
             "| level (channels, size) | BLOCK | TILES | backward ms | vs (1024, 1) | rel. diff dx, dW | rel. diff dbias |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q for q in rows if q["channels"] == r["channels"] and (q["block"], q["tiles"]) == VARIANTS[0])
        lines.append(f"| {r['channels']}, {r['size']} | {r['block']} | {r['tiles']} | {r['backward_ms']:.3f} | "
                     f"{base['backward_ms'] / r['backward_ms']:.2f}x | {r['rel_diff_dx_dw']:.1e} | "
                     f"{r['rel_diff_dbias']:.1e} |")
    sweep_report.write(args.out, "cell_bwd_tiles", meta, rows, lines)


if __name__ == "__main__":
    main()
