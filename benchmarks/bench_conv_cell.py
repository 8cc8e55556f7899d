"""Level 1's training forward on the concatenated path: cuDNN's convolution + the cell kernel per step against the
conv + cell step kernel (``ops/triton/convlstm_conv_cell.py``) at several tiles, as CUDA-graph replays.

The call is ``convlstm_concat.forward`` as the training step makes it (batch 128, 5 steps, 32 input and 32 hidden
channels, 30 x 30, bf16 operands, float16 cells, time-major zero-bordered inputs), x's copy into xh included.
Settings: "cudnn" (MSCRED_LSTM_CONV_CELL=0, the default path) first, then the step kernel at each
"BLOCK_M/warps/stages/programs-per-SM" (MSCRED_LSTM_CONV_CELL_TILE; programs per SM > 0: persistent), "+resident"
for the weight kept in shared memory, "+ws" for the warp-specialised loop. Outputs (h, c, the gates) compared with
the first setting's: largest difference relative to the largest magnitude (the two sum the convolution in different
orders).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_conv_cell.py [--out DIR] [--tiles A,B,...]
[--once SETTING: two calls and exit, for ncu]
Writes DIR/conv_cell.md and .json (DIR: benchmarks/results/conv_cell) and DIR/best_tile.env (the fastest tile's
settings, for the step's A/B; empty when no tile beats the default path).
"""
from __future__ import annotations

import argparse
import os
import pathlib

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms  # noqa: E402

B, T, C, CH, N = 128, 5, 32, 32, 30
PADS = (0, 1, 0, 1)


def _inputs():
    g = torch.Generator(device="cuda").manual_seed(1)
    images = torch.zeros(T * B, N + 1, N + 1, C, device="cuda", dtype=torch.bfloat16)
    images[:, :N, :N] = torch.randn(T * B, N, N, C, device="cuda", generator=g).to(torch.bfloat16)
    images = images.permute(0, 3, 1, 2)  # (T*B, C, Hp, Wp) channels-last
    scale = 1 / (2 * (C + CH) ** 0.5)
    w_x = (torch.randn(4 * CH, C, 2, 2, device="cuda", generator=g) * scale).to(torch.bfloat16)
    w_h = (torch.randn(4 * CH, CH, 2, 2, device="cuda", generator=g) * scale).to(torch.bfloat16)
    bias = torch.randn(4 * CH, device="cuda", generator=g) * 0.5
    fmt = torch.channels_last
    return images, w_x.contiguous(memory_format=fmt), w_h.contiguous(memory_format=fmt), bias


def _environment(setting: str) -> dict[str, str]:
    """The variables of a setting: "cudnn", or "BLOCK_M/warps/stages/programs-per-SM[+resident][+ws]"."""
    tile, *flags = setting.split("+")
    return {"MSCRED_LSTM_CONV_CELL": "0" if tile == "cudnn" else "1",
            "MSCRED_LSTM_CONV_CELL_TILE": "" if tile == "cudnn" else tile,
            "MSCRED_LSTM_CONV_CELL_RESIDENT": "1" if "resident" in flags else "0",
            "MSCRED_LSTM_CONV_CELL_WS": "1" if "ws" in flags else "0"}


def _kernel_times(fn) -> str:
    """The call's kernels by name (the profiler's CUDA events of one eager call): "name x count = us", largest first."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    totals = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
        if us > 0 and e.count:
            totals.append((us, e.key[:48], e.count))
    return "; ".join(f"{name} x{n} = {us:.1f} us" for us, name, n in sorted(totals, reverse=True)[:6])


def main() -> None:
    from mscred.ops.triton import convlstm_concat
    from mscred.ops.triton.runtime import tl

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/conv_cell")
    ap.add_argument("--tiles", default="128/8/2/0,128/8/2/2,128/8/3/2,64/4/2/4,64/4/3/3,128/8/2/2+resident")
    ap.add_argument("--once", metavar="SETTING", help="run the call twice under SETTING and exit (for profilers)")
    args = ap.parse_args()
    images, w_x, w_h, bias = _inputs()
    bufs = convlstm_concat.buffers(B, T, C, CH, N, N, PADS, images, torch.float16)

    def forward():
        return convlstm_concat.forward(images, w_x, w_h, bias, *bufs, PADS, 1.0, tl.float32)

    if args.once:
        os.environ.update(_environment(args.once))
        for _ in range(2):
            forward()
        torch.cuda.synchronize()
        return

    rows, ref = [], None
    for setting in ["cudnn", *args.tiles.split(",")]:
        os.environ.update(_environment(setting))
        try:
            gates = forward()  # compiles outside the capture
            torch.cuda.synchronize()
        except Exception as err:  # a tile that does not compile (shared memory) is a row, not the end
            rows.append(dict(setting=setting, ms=None, vs_first=None, rel_diff=None, error=str(err)[:120],
                             kernels=""))
            print(rows[-1], flush=True)
            continue
        got = [bufs[0].clone(), bufs[1].clone(), torch.stack(gates)]
        ref = ref or got
        diff = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(got, ref))
        ms = graph_ms(forward)
        kernels = _kernel_times(forward)
        first = rows[0]["ms"] if rows else ms
        rows.append(dict(setting=setting, ms=round(ms, 4), vs_first=round(first / ms, 3),
                         rel_diff=float(f"{diff:.2e}"), error="", kernels=kernels))
        print(rows[-1], flush=True)
    sweep_report.table(
        args.out, "conv_cell", "bench_conv_cell.py",
        "Level 1's training forward: cuDNN + cell kernel against the conv + cell step kernel",
        f"convlstm_concat.forward at batch {B}, {T} steps, C = Ch = {C}, {N} x {N}, bf16 operands, float16 cells; "
        "one CUDA graph of the whole call (x's copy into xh included), median of 30 replays. Setting: 'cudnn' the "
        "default path, else the step kernel's BLOCK_M/warps/stages/programs-per-SM (0: one program a tile). "
        "Difference: largest over h, c and the gates, relative to the first setting's largest magnitude.",
        ["setting", "ms", "vs cudnn", "largest difference (relative)", "error", "kernels of one eager call"], rows,
        lambda r: (r["setting"], r["ms"], f"{r['vs_first']:.2f}x" if r["vs_first"] else "-",
                   f"{r['rel_diff']:.1e}" if r["rel_diff"] is not None else "-", r["error"] or "",
                   r.get("kernels", "")))


    # the fastest tile of the step kernel, as the environment lines that select it (for the step's A/B), if it
    # beats the default path
    timed = [r for r in rows[1:] if r["ms"] is not None and rows[0]["ms"] and r["ms"] < rows[0]["ms"]]
    best = min(timed, key=lambda r: r["ms"]) if timed else None
    lines = [] if best is None else [f"{k}={v}" for k, v in _environment(best["setting"]).items()]
    (pathlib.Path(args.out) / "best_tile.env").write_text("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
