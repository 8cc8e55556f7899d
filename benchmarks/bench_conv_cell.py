"""Levels 1-2's training forward on the concatenated path: cuDNN's convolution + the Triton cell kernel per step (the
default) against the CUDA conv + cell step kernel (``ops/conv_cell``, MSCRED_LSTM_CONV_CELL=1), as CUDA-graph
replays.

The call is ``convlstm_concat.forward`` as the training step makes it (batch 128, 5 steps, bf16 operands, float16
cells, time-major zero-bordered inputs; x's copy into xh included): level 1 (C = Ch = 32, 30 x 30) and level 2
(C = Ch = 64, 15 x 15). Outputs (h, c, the gates) compared with the split path's: largest difference relative to the
largest magnitude (the two sum the convolution in different orders). With the kernels of one eager call of each.
Also the kernel's A/B builds (``--variants``: MSCRED_CONV_CELL_FLAGS), at level 1 or at both levels
(``--variant-levels 1 2``).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_conv_cell.py [--out DIR] [--once SETTING LEVEL: two
calls and exit, for ncu]. Writes DIR/conv_cell.md and .json (DIR: benchmarks/results/conv_cell_cuda) and
DIR/faster.env (MSCRED_LSTM_CONV_CELL=1 if the kernel beats the split path at level 1, =all at both, else empty).
"""
from __future__ import annotations

import argparse
import os
import pathlib

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms  # noqa: E402

B, T = 128, 5
LEVELS = {1: (32, 30), 2: (64, 15)}  # level: (C = Ch, map side)
PADS = (0, 1, 0, 1)
# The A operand by ldmatrix into registers (the first build), and three row buffers a warpgroup
DEFAULT_VARIANTS = "ldmatrix=-DMSCRED_CONV_CELL_SMEM_A=0;stages3=-DMSCRED_CONV_CELL_STAGES=3"


def _inputs(C: int, n: int):
    g = torch.Generator(device="cuda").manual_seed(1)
    images = torch.zeros(T * B, n + 1, n + 1, C, device="cuda", dtype=torch.bfloat16)
    images[:, :n, :n] = torch.randn(T * B, n, n, C, device="cuda", generator=g).to(torch.bfloat16)
    images = images.permute(0, 3, 1, 2)  # (T*B, C, Hp, Wp) channels-last
    scale = 1 / (2 * (2 * C) ** 0.5)
    fmt = torch.channels_last
    w_x = (torch.randn(4 * C, C, 2, 2, device="cuda", generator=g) * scale).to(torch.bfloat16)
    w_h = (torch.randn(4 * C, C, 2, 2, device="cuda", generator=g) * scale).to(torch.bfloat16)
    bias = (torch.randn(4 * C, device="cuda", generator=g) * 0.5).to(torch.bfloat16)
    return images, w_x.contiguous(memory_format=fmt), w_h.contiguous(memory_format=fmt), bias


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
    from mscred.ops import conv_cell
    from mscred.ops.triton import convlstm_concat
    from mscred.ops.triton.runtime import tl

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/conv_cell_cuda")
    ap.add_argument("--once", nargs=2, metavar=("SETTING", "LEVEL"), help="split|kernel and 1|2: two calls, exit")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help="level 1's A/B builds: 'label=-D flags' separated by ';' (MSCRED_CONV_CELL_FLAGS)")
    ap.add_argument("--variant-levels", nargs="+", type=int, default=[1], choices=sorted(LEVELS),
                    help="the levels the --variants run at (default: 1)")
    args = ap.parse_args()
    variants = [tuple(v.split("=", 1)) for v in args.variants.split(";") if v.strip()]
    rows = []
    for level, (C, n) in LEVELS.items():
        if args.once and int(args.once[1]) != level:
            continue
        images, w_x, w_h, bias = _inputs(C, n)
        bufs = convlstm_concat.buffers(B, T, C, C, n, n, PADS, images, torch.float16)

        def forward():
            return convlstm_concat.forward(images, w_x, w_h, bias, *bufs, PADS, 1.0, tl.float32)

        ref = None
        settings = [("split", "")] + [("kernel", "")] + (variants if level in args.variant_levels else [])
        for setting, flags in settings:
            if args.once and args.once[0] != setting:
                continue
            os.environ["MSCRED_LSTM_CONV_CELL"] = "0" if setting == "split" else "all"
            os.environ["MSCRED_CONV_CELL_FLAGS"] = flags
            if args.once:
                for _ in range(2):
                    forward()
                torch.cuda.synchronize()
                continue
            ran = setting == "split" or conv_cell.runs(bufs[2], torch.float16, C, C, (2, 2), PADS)
            gates = forward()
            torch.cuda.synchronize()
            got = [bufs[0].clone(), bufs[1].clone(), torch.stack(gates)]
            # a build that stores the gates with the bias (MSCRED_CONV_CELL_PRE_WITH_BIAS): compared without it
            if setting != "split" and ran and conv_cell._pre_with_bias(conv_cell._extension()):
                got[2] = got[2].float() - bias.float().view(1, 1, -1, 1, 1)
            ref = ref or got
            diff = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                       for a, b in zip(got, ref))
            ms = graph_ms(forward)
            first = next(r["ms"] for r in rows if r["level"] == level and r["setting"] == "split") \
                if setting != "split" else ms
            rows.append(dict(level=level, setting=setting if ran else f"{setting} (did not run)",
                             ms=round(ms, 4), vs_split=round(first / ms, 3), rel_diff=float(f"{diff:.2e}"),
                             kernels=_kernel_times(forward)))
            print(rows[-1], flush=True)
        os.environ["MSCRED_CONV_CELL_FLAGS"] = ""
    if args.once:
        return
    sweep_report.table(
        args.out, "conv_cell", "bench_conv_cell.py",
        "Levels 1-2's training forward: cuDNN + cell kernel against the CUDA conv + cell step kernel",
        f"convlstm_concat.forward at batch {B}, {T} steps, bf16 operands, float16 cells; level 1 C = Ch = 32 at "
        "30 x 30, level 2 C = Ch = 64 at 15 x 15; one CUDA graph of the whole call (x's copy into xh included), "
        "median of 30 replays. Difference: largest over h, c and the gates, relative to the split path's largest "
        "magnitude.",
        ["level", "setting", "ms", "vs split", "largest difference (relative)", "kernels of one eager call"], rows,
        lambda r: (r["level"], r["setting"], r["ms"], f"{r['vs_split']:.2f}x", f"{r['rel_diff']:.1e}", r["kernels"]))
    # the setting for the step's A/B: the kernel at the levels where it is faster (level 1 alone: "1")
    faster = [r["level"] for r in rows if r["setting"] == "kernel" and r["vs_split"] > 1]
    setting = {(1,): "1", (1, 2): "all"}.get(tuple(faster))
    (pathlib.Path(args.out) / "faster.env").write_text(f"MSCRED_LSTM_CONV_CELL={setting}\n" if setting else "")


if __name__ == "__main__":
    main()
