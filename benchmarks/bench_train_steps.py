"""The training ConvLSTM's step kernels (``convlstm_step``) against the per-step path, per level, with a tile sweep.

Levels 1-2 of the default model at the training batch (128 windows of 5 steps, bf16, channels-last, time-major
as the encoder hands them over, kernel 2): ``convlstm_train``'s forward and ``convlstm_train_backward``, each
captured in a CUDA graph and timed by replays (``bench_train_cells.graph_ms``). Rows: the per-step path
(MSCRED_STEP_GEMM=0: a cuDNN recurrent convolution and a cell kernel per step each way), then the step kernels
with each tile of ``TILES`` (BLOCK_M pixels / BC hidden channels / warps / the backward's K chunk BK, the
same tile both ways). Each row's
gradients (dx, dW_x, dW_h, dbias) are compared with the per-step path's: the largest relative difference (bf16
roundings: the step kernels keep the recurrent gates and gradients in float32 where cuDNN rounds them to bf16).

The fastest tile per level and direction is written as an MSCRED_STEP_BLOCKS value to DIR/best_blocks.txt, for
the whole-model run that follows in gpu_train_steps.sh.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_train_steps.py [--out DIR]
Writes DIR/train_steps.md, DIR/train_steps.json and DIR/best_blocks.txt.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms, level_inputs  # noqa: E402

LEVELS = ((32, 30), (64, 15))
# (BLOCK_M, BC, warps, BK), the same tile both ways (BK is the backward's): tiles that ptxas compiled without
# spilling for both levels on the CPU box (sm_90, Triton 3.9), 4- and 8-warp.
TILES = ((32, 16, 4, 32), (32, 32, 4, 32), (64, 16, 4, 32), (64, 16, 8, 32), (64, 32, 8, 32), (64, 32, 8, 64),
         (128, 16, 8, 32))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/train_steps")
    args = ap.parse_args()
    from mscred.ops.triton import convlstm as fused

    rows, best = [], []
    for ch, n in LEVELS:
        x, w, b, dout = level_inputs(ch, n)
        xp, w_x, w_h = fused.train_inputs(x, w)
        ref = None
        for tile in (None,) + tuple(t for t in TILES if t[1] <= ch):
            os.environ["MSCRED_STEP_GEMM"] = "0" if tile is None else "1"
            if tile is not None:
                os.environ["MSCRED_STEP_BLOCKS"] = ";".join(f"{d}:*:{'/'.join(map(str, tile))}" for d in ("fwd", "bwd"))
            label = "per-step path" if tile is None else "steps " + "/".join(map(str, tile))
            try:
                state = fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")

                def forward():
                    return fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")

                def backward():
                    return fused.convlstm_train_backward(dout, xp, w_x, w_h, b, *state[1:], 1.0, "nhwc")

                grads = [t.float() for t in backward()]
                outs = state[0].float()
                if ref is None:
                    ref = (outs, grads)
                diff = max(((a - r).norm() / r.norm()).item() for a, r in zip([outs, *grads], [ref[0], *ref[1]]))
                row = dict(channels=ch, size=n, path=label, tile=tile, forward_ms=graph_ms(forward),
                           backward_ms=graph_ms(backward), rel_diff=diff)
            except Exception as err:  # a tile the compiler refuses (shared memory, registers): recorded, not fatal
                row = dict(channels=ch, size=n, path=label, tile=tile, error=f"{type(err).__name__}: {err}"[:200])
            rows.append(row)
            print(row, flush=True)
        timed = [r for r in rows if r["channels"] == ch and r["tile"] is not None and "error" not in r]
        for direction in ("fwd", "bwd"):
            key = "forward_ms" if direction == "fwd" else "backward_ms"
            if timed:
                fastest = min(timed, key=lambda r: r[key])
                best.append(f"{direction}:{ch}:{'/'.join(map(str, fastest['tile']))}")
    os.environ.pop("MSCRED_STEP_BLOCKS", None)
    os.environ.pop("MSCRED_STEP_GEMM", None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "best_blocks.txt").write_text(";".join(best) + "\n")
    meta = (f"{sweep_report.machine_line()}. Batch 128, 5 steps, bf16, kernel 2, time-major channels-last input, "
            "CUDA-graph replays (median of 30). Command: `PYTHONPATH=src python3 benchmarks/bench_train_steps.py`. "
            f"Fastest tiles: `MSCRED_STEP_BLOCKS={';'.join(best)}`.")
    lines = ["# The training ConvLSTM's step kernels against the per-step path (batch 128, bf16, graph replays)", "",
             meta, "", "| level (channels, size) | path (BLOCK_M / BC / warps / BK) | forward ms | backward ms | "
             "fwd + bwd vs per-step path | rel. diff vs per-step path |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['channels']}, {r['size']} | {r['path']} | {r['error']} | | | |")
            continue
        base = next(q for q in rows if q["channels"] == r["channels"] and q["tile"] is None)
        both = r["forward_ms"] + r["backward_ms"]
        lines.append(f"| {r['channels']}, {r['size']} | {r['path']} | {r['forward_ms']:.3f} | {r['backward_ms']:.3f} "
                     f"| {(base['forward_ms'] + base['backward_ms']) / both:.2f}x | {r['rel_diff']:.1e} |")
    sweep_report.write(args.out, "train_steps", meta, rows, lines)


if __name__ == "__main__":
    main()
