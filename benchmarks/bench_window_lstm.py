"""Inference through one ConvLSTM level: one program per window through every step, against the per-step path.

For each MSCRED level (hidden channels = input channels, image size), bf16, channels-last, no autograd, the fused
op ``ops/triton/convlstm.py`` with MSCRED_WINDOW_LSTM=0 (per step: cuDNN recurrent convolution + ``cell_fwd_kernel``)
and =all (``window_lstm_kernel``, ``ops/triton/convlstm_window.py``: levels up to its MAX_CH channels, at every batch)
over a sweep of its tiles (MSCRED_WINDOW_LSTM_BLOCKS), at

* the scoring batch: all 3,591 windows of the thesis workload as one sliding view of 3,595 steps (what
  ``MSCREDNet.forward_windows`` passes; the input gates are computed once per step), and
* the training batch: 128 independent windows.

Each row's output is checked: at batch 128 against the float64 reference, at the scoring batch against the
MSCRED_WINDOW_LSTM=0 output. Timing: ``triton.testing.do_bench`` (L2 cleared before each call), median ms.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_window_lstm.py [--out DIR] [--tiles BM/W/S/P,...]
Writes DIR/window_lstm.md, DIR/window_lstm.json, DIR/best_blocks.txt (the tile with the lowest time summed over
the levels at the scoring batch, as MSCRED_WINDOW_LSTM_BLOCKS takes it) and DIR/best_per_level.txt (per level: the
fastest tile, its time and the per-step path's).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib

import torch

LEVELS = [(32, 30), (64, 15)]  # the levels the kernel takes (convlstm_window.MAX_CH)
SCORING_WINDOWS, TRAIN_BATCH, T = 3591, 128, 5
CONFIGS = [  # (BLOCK_M, num_warps, num_stages, prefetch)
    (64, 8, 2, 1), (64, 8, 2, 0), (32, 4, 2, 1), (32, 4, 2, 0), (16, 4, 2, 1), (64, 8, 1, 1), (32, 8, 2, 1),
    (64, 4, 2, 1), (128, 8, 2, 1), (16, 4, 1, 0),
]
MAX_ACC_REGS = 128  # tiles whose (BLOCK_M, 4Ch) fp32 accumulator needs more registers per thread are not built


def fits(cfg, ch: int) -> bool:
    bm, warps = cfg[:2]
    return 4 * bm * ch <= MAX_ACC_REGS * 32 * warps


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.double() - ref.double()).norm() / ref.double().norm()).item()


def bench(fn) -> float:
    from triton.testing import do_bench
    return do_bench(fn, warmup=5, rep=40, return_mode="median")


def level_inputs(ch: int, n: int, batch: int, sliding: bool):
    """x (batch, T, ch, n, n) bf16 with channels last (a sliding view of batch + T - 1 steps if ``sliding``), the
    level's weight (4ch, 2ch, 2, 2) and bias, bf16."""
    g = torch.Generator(device="cuda").manual_seed(ch + n + batch)
    images = batch + T - 1 if sliding else batch * T
    # Channels-last steps, rounded to bf16 before the view is made (a copy of an overlapping view would be dense).
    steps = torch.randn(images, n, n, ch, device="cuda", generator=g).to(torch.bfloat16).permute(0, 3, 1, 2)
    if sliding:
        x = steps.as_strided((batch, T, ch, n, n), (steps.stride(0), *steps.stride()), 0)
    else:
        x = steps.reshape(batch, T, n, n, ch).permute(0, 1, 4, 2, 3)
    w = torch.randn(4 * ch, 2 * ch, 2, 2, device="cuda", generator=g) / (2 * (2 * ch) ** 0.5)
    b = torch.randn(4 * ch, device="cuda", generator=g) * 0.5
    return x, w.to(torch.bfloat16), b.to(torch.bfloat16)


def run(configs=CONFIGS) -> tuple[list[dict], dict]:
    from mscred.ops import reference
    from mscred.ops.triton import convlstm as fused
    os.environ["MSCRED_FUSED_LAYOUT"] = "nhwc"
    rows, totals = [], {}
    for name, batch, sliding in (("scoring", SCORING_WINDOWS, True), ("batch 128", TRAIN_BATCH, False)):
        for ch, n in LEVELS:
            x, w, b = level_inputs(ch, n, batch, sliding)

            def call():
                with torch.no_grad():
                    return fused.convlstm(x, w, b, 1.0)

            os.environ["MSCRED_WINDOW_LSTM"] = "0"
            os.environ.pop("MSCRED_WINDOW_LSTM_BLOCKS", None)
            off = call()
            if sliding:
                oracle, off_err = off, 0.0
            else:
                oracle = reference.convlstm(x.double().contiguous(), w.double(), b.double(), 1.0)
                off_err = rel(off, oracle)
            off_ms = bench(call)
            os.environ["MSCRED_WINDOW_LSTM"] = "all"  # every batch (the product gates it, MAX_BATCH)
            # The sweep at the scoring batch (the product's inference batch); at batch 128 the first tiles check
            # the float64 error and show the small-batch speed.
            for cfg in [c for c in configs if fits(c, ch)][:None if sliding else 2]:
                os.environ["MSCRED_WINDOW_LSTM_BLOCKS"] = "/".join(map(str, cfg))
                try:
                    got = call()
                    torch.cuda.synchronize()
                except Exception as err:  # a tile Triton cannot build (shared memory, registers): reported
                    print(f"{name} Ch={ch} {cfg}: {type(err).__name__}: {str(err)[:150]}", flush=True)
                    continue
                err = rel(got, oracle)
                ms = bench(call)
                row = dict(workload=name, batch=batch, ch=ch, n=n, config=list(cfg), off_ms=off_ms, on_ms=ms,
                           speedup=off_ms / ms, err=err, off_err=off_err)
                rows.append(row)
                totals.setdefault((name, cfg), []).append(ms)
                print(row, flush=True)
    os.environ.pop("MSCRED_WINDOW_LSTM_BLOCKS", None)
    os.environ.pop("MSCRED_WINDOW_LSTM", None)
    return rows, totals


def to_markdown(rows: list[dict], totals: dict, meta: str) -> tuple[str, tuple]:
    lines = ["# One ConvLSTM level in bf16 inference: one program per window through every step", "", meta, "",
             "Best tile per level (off = per step, cuDNN recurrent convolution + cell kernel, MSCRED_WINDOW_LSTM=0; "
             "window = window_lstm_kernel; the error "
             "column: batch 128 against float64, with the off path's error after the slash; scoring against the "
             "off path's output):", "",
             "| workload | level (Ch, n) | off ms | window ms | speed-up "
             "| tile (BM, warps, stages, prefetch[, maxnreg]) | rel err |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    best_rows = {}
    for r in rows:
        key = (r["workload"], r["ch"])
        if r["err"] < 2e-2 and (key not in best_rows or r["on_ms"] < best_rows[key]["on_ms"]):
            best_rows[key] = r
    for r in best_rows.values():
        err = f"{r['err']:.1e}" + (f" / {r['off_err']:.1e}" if r["workload"] != "scoring" else "")
        lines.append(f"| {r['workload']} | ({r['ch']}, {r['n']}) | {r['off_ms']:.4f} | {r['on_ms']:.4f} | "
                     f"{r['speedup']:.2f}x | {tuple(r['config'])} | {err} |")
    lines += ["", "Sum over the levels, one tile for all (every tile that ran on every level):", "",
              "| workload | tile | window ms (sum) | off ms (sum) | speed-up |", "| --- | --- | --- | --- | --- |"]
    best = None
    for (workload, cfg), times in sorted(totals.items(), key=lambda kv: (kv[0][0], sum(kv[1]))):
        if len(times) != len(LEVELS):
            continue
        off = sum(r["off_ms"] for r in rows if r["workload"] == workload and list(cfg) == r["config"])
        lines.append(f"| {workload} | {cfg} | {sum(times):.4f} | {off:.4f} | {off / sum(times):.2f}x |")
        if workload == "scoring" and (best is None or sum(times) < best[1]):
            best = (cfg, sum(times))
    return "\n".join(lines) + "\n", best[0] if best else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/window_lstm")
    ap.add_argument("--tiles", default="", help="tiles BM/warps/stages/prefetch, comma-separated (default: CONFIGS)")
    args = ap.parse_args()
    import triton
    rows, totals = run([tuple(int(v) for v in t.split("/")) for t in args.tiles.split(",") if t] or CONFIGS)
    meta = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
            f"cuDNN {torch.backends.cudnn.version()}, {datetime.datetime.now(datetime.timezone.utc).isoformat()}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_window_lstm.py`.")
    md, best = to_markdown(rows, totals, meta)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "window_lstm.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (out / "window_lstm.md").write_text(md)
    if best:
        (out / "best_blocks.txt").write_text("/".join(map(str, best)) + "\n")
    per_level = {}
    for r in rows:
        if r["workload"] == "scoring" and r["err"] < 2e-2 and r["on_ms"] < per_level.get(r["ch"], (None, 1e9))[1]:
            per_level[r["ch"]] = (r["config"], r["on_ms"], r["off_ms"])
    (out / "best_per_level.txt").write_text("".join(f"{ch} {'/'.join(map(str, c))} {ms:.4f} ms (off {off:.4f} ms)\n"
                                                    for ch, (c, ms, off) in sorted(per_level.items())))
    print(md)


if __name__ == "__main__":
    main()
