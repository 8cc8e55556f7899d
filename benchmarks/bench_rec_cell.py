"""Levels 3-4's training forward with the recurrent convolution and the cell update in one Triton kernel
(``ops/triton/convlstm_rec_cell.py``) against the split path (cuDNN's convolution, then ``cell_fwd_kernel``).

Each row: the level's whole training forward (``convlstm_train``: the input convolution of all steps, step 0's cell
kernel, steps 1-4), bf16, batch 128, time-major channels-last input as in training, captured in a CUDA graph and
replayed (median of 30, ``bench_train_cells.graph_ms``); the split path (MSCRED_LSTM_REC_CELL=0) and the fused step
at each tile of the sweep (MSCRED_REC_CELL_TILE). Beside each: the fused kernel's registers and spills, and its
outputs against the split path's (relative norm of the difference of h and of the stored gate pre-activations:
one bf16 rounding apart, the fused step adds the recurrent gates in float32).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_rec_cell.py [--out DIR] [--quick]
Writes DIR/rec_cell.md and DIR/rec_cell.json (DIR: benchmarks/results/rec_cell_train); the JSON's "best" holds, per
level that beat the split path, its fastest tile, and "setting" / "tile" the environment that selects them
(``convlstm_rec_cell.TILES`` holds the ones of results/rec_cell_train/).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_cells import graph_ms, level_inputs  # noqa: E402

# Level 2 (64 channels, 15 x 15) trains on the concatenated path (convlstm_concat), not the per-step one.
LEVELS = ((128, 8), (256, 4))
# (BM, BC, BK, warps, stages)
TILES = [(64, 32, 64, 4, s) for s in (2, 3, 4)] + [(128, 32, 64, 8, s) for s in (2, 3, 4)] + \
        [(128, 32, 64, 4, 3), (64, 16, 64, 4, 3), (128, 16, 64, 4, 3), (64, 64, 64, 8, 3), (128, 64, 64, 8, 3),
         (64, 32, 32, 4, 4), (128, 32, 32, 8, 4), (32, 32, 64, 4, 3)]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/rec_cell_train")
    ap.add_argument("--quick", action="store_true", help="three tiles only")
    args = ap.parse_args()
    from mscred.ops.triton import convlstm as fused
    from mscred.ops.triton import convlstm_rec_cell as rec_cell

    torch.backends.cudnn.benchmark = True  # as in training
    tiles = TILES[:3] if args.quick else TILES
    rows, best = [], {}
    for ch, n in LEVELS:
        x, w, b, _ = level_inputs(ch, n)
        xp, w_x, w_h = fused.train_inputs(x, w)

        def forward():
            with torch.no_grad():
                return fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")

        os.environ["MSCRED_LSTM_REC_CELL"] = "0"
        split_out = forward()
        split_ms = graph_ms(forward)
        rows.append({"ch": ch, "n": n, "tile": "split path", "ms": split_ms})
        print(f"level Ch={ch}: split {split_ms * 1e3:.1f} us", flush=True)
        os.environ["MSCRED_LSTM_REC_CELL"] = str(ch)
        for tile in tiles:
            os.environ["MSCRED_REC_CELL_TILE"] = "/".join(map(str, tile))
            kernels = []
            real = rec_cell.step
            rec_cell.step = lambda *a: kernels.append(real(*a)) or kernels[-1]
            try:
                got = forward()
            except Exception as exc:  # a tile that does not compile (shared memory) is a row, not the end
                rows.append({"ch": ch, "n": n, "tile": list(tile), "error": f"{type(exc).__name__}: {exc}"[:200]})
                print(f"  {tile}: {type(exc).__name__}", flush=True)
                continue
            finally:
                rec_cell.step = real
            ms = graph_ms(forward)
            k = kernels[0]
            row = {"ch": ch, "n": n, "tile": list(tile), "ms": ms, "speedup": split_ms / ms,
                   "regs": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                   "h_rel": _rel(got[0], split_out[0]), "pre_rel": _rel(got[1][0], split_out[1][0]),
                   "cells_rel": _rel(got[2], split_out[2])}
            rows.append(row)
            print(f"  {tile}: {ms * 1e3:.1f} us ({row['speedup']:.2f}x) regs {row['regs']} spills {row['spills']} "
                  f"h {row['h_rel']:.2e} pre {row['pre_rel']:.2e}", flush=True)
            if row["speedup"] > 1 and row["ms"] < best.get(ch, {"ms": float("inf")})["ms"]:
                best[ch] = row
        os.environ.pop("MSCRED_REC_CELL_TILE", None)
    setting = ",".join(str(ch) for ch in best) or "0"
    tile_env = ";".join(f"{ch}:" + "/".join(map(str, r["tile"])) for ch, r in best.items())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rec_cell.json").write_text(json.dumps({"rows": rows, "best": best, "setting": setting,
                                                   "tile": tile_env}, indent=1))
    lines = [f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, batch 128, 5 steps; the level's "
             "training forward as one CUDA-graph replay (median of 30)", "",
             "| hidden channels, map | tile BM/BC/BK/warps/stages | us | vs split | regs | spills | h rel | pre rel |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        tile = r["tile"] if isinstance(r["tile"], str) else "/".join(map(str, r["tile"]))
        if "error" in r:
            lines.append(f"| {r['ch']}, {r['n']}x{r['n']} | {tile} | {r['error']} | | | | | |")
        elif "speedup" in r:
            lines.append(f"| {r['ch']}, {r['n']}x{r['n']} | {tile} | {r['ms'] * 1e3:.1f} | {r['speedup']:.2f}x | "
                         f"{r['regs']} | {r['spills']} | {r['h_rel']:.2e} | {r['pre_rel']:.2e} |")
        else:
            lines.append(f"| {r['ch']}, {r['n']}x{r['n']} | {tile} | {r['ms'] * 1e3:.1f} | 1.00x | | | | |")
    lines += ["", f"Best per level (faster than the split path): MSCRED_LSTM_REC_CELL={setting} "
              f"MSCRED_REC_CELL_TILE='{tile_env}'"]
    (out / "rec_cell.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
