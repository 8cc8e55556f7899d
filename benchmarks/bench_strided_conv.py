"""The strided convolutions' data gradients as Triton GEMMs of our own (``ops/triton/strided_conv.py``) against
cuDNN's, at the training step's shapes: the encoder's conv2-4 and the decoder's deconv4-2, and the decoder's and
the encoder's forwards (``strided_conv.conv_transpose``, ``strided_conv.conv``).

bf16, channels-last; the encoder at batch 128 x 5 steps (N = 640 images), the decoder at 128: for each shape cuDNN's
data gradient (``aten.convolution_backward``, as the step runs it) and each of the module's kernels that can compute
it ("columns" and "taps" for a convolution, "gather" for the transposed ones) at every tile setting
(``MSCRED_PHASE_DGRAD_TILE`` = rows / columns / warps), each captured alone in a CUDA graph, CUDA-event medians of 20
replays after 5 warm-ups; each output's largest difference from cuDNN's relative to cuDNN's largest magnitude.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_strided_conv.py [--out DIR]
Writes DIR/strided_conv.md and .json.
"""
from __future__ import annotations

import argparse
import itertools
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed, _rel_diff  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402
from mscred.ops.triton import strided_conv

SHAPES = {  # name: (N, C, H, W, O, kernel, stride, kernels), the largest cuDNN times first (a run cut short keeps
    # those). The input is the one the step convolves: conv2's and conv3's padded copies, conv4's level 3's bordered
    # [x, h] buffer (its last row and column read by no tap); for the transposed convolutions (kernel "gather") C is
    # their input's channels and O their output's.
    "conv2's data gradient (32 -> 64, 3 x 3, 31 x 31 -> 15 x 15)": (640, 32, 31, 31, 64, 3, 2, ("columns", "taps")),
    "deconv3's data gradient (256 -> 64, 2 x 2, 8 x 8 -> 16 x 16)": (128, 256, 8, 8, 64, 2, 2, ("gather",)),
    "conv3's data gradient (64 -> 128, 2 x 2, 16 x 16 -> 8 x 8)": (640, 64, 16, 16, 128, 2, 2, ("columns",)),
    "conv4's data gradient (128 -> 256, 2 x 2, 9 x 9 -> 4 x 4)": (640, 128, 9, 9, 256, 2, 2, ("columns", "taps")),
    # the decoder's forwards (MSCRED_PHASE_DECONV=1): each the data gradient of the convolution with its weight
    "deconv2's forward (the dgrad of 32 -> 128, 31 x 31 -> 15 x 15)": (128, 32, 31, 31, 128, 3, 2,
                                                                        ("columns", "taps")),
    "deconv3's forward (the dgrad of 64 -> 256, 16 x 16 -> 8 x 8)": (128, 64, 16, 16, 256, 2, 2, ("columns",)),
    "deconv4's forward (the dgrad of 128 -> 256, 8 x 8 -> 4 x 4)": (128, 128, 8, 8, 256, 2, 2, ("columns",)),
    "deconv2's data gradient (128 -> 32, 3 x 3, 15 x 15 -> 31 x 31)": (128, 128, 15, 15, 32, 3, 2, ("gather",)),
    "deconv4's data gradient (256 -> 128, 2 x 2, 4 x 4 -> 8 x 8)": (128, 256, 4, 4, 128, 2, 2, ("gather",)),
    # the encoder's forwards (MSCRED_PHASE_CONV=1): each the gather of a transposed convolution's data gradient,
    # (N, C, H, W, O) = (images, the convolution's output channels and size, its input channels)
    "conv2's forward (the gather of 64 -> 32, 15 x 15 -> 31 x 31)": (640, 64, 15, 15, 32, 3, 2, ("gather",)),
    "conv3's forward (the gather of 128 -> 64, 8 x 8 -> 16 x 16)": (640, 128, 8, 8, 64, 2, 2, ("gather",)),
    # (conv4 reads an 8 x 8 input here; the step's is level 3's 9 x 9 bordered buffer, whose last row and column
    # no tap reads: the same work)
    "conv4's forward (the gather of 256 -> 128, 4 x 4 -> 8 x 8)": (640, 256, 4, 4, 128, 2, 2, ("gather",)),
}
TILES = [f"{m}/{n}/{w}" for (m, w), n in itertools.product(((64, 4), (128, 4), (128, 8), (256, 8)), (64, 128))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/strided_conv")
    args = ap.parse_args()
    rows = []
    for name, (N, C, H, W, O, k, s, kernels) in SHAPES.items():
        gen = torch.Generator(device="cuda").manual_seed(0)
        transposed = kernels == ("gather",)
        ho, wo = ((H - 1) * s + k, (W - 1) * s + k) if transposed else ((H - k) // s + 1, (W - k) // s + 1)
        dy = torch.randn(N, O, ho, wo, device="cuda", generator=gen).to(torch.bfloat16,
                                                                          memory_format=torch.channels_last)
        w = torch.randn(*((C, O) if transposed else (O, C)), k, k, device="cuda", generator=gen).to(
            torch.bfloat16, memory_format=torch.channels_last)
        shape = torch.Size((N, C, H, W))
        ref = strided_conv.reference(dy, w, shape, s, (0, 0), transposed)
        flop = 2 * N * (H * W if transposed else ho * wo) * O * C * k * k
        ms = median_event_ms(_graphed(strided_conv.reference, (dy, w, shape, s, (0, 0), transposed)).replay,
                             iters=20)
        rows.append(dict(shape=name, form="cuDNN", tile="", ms=ms, tflops=flop / ms / 1e9, rel_diff=0.0))
        print(rows[-1], flush=True)
        for kernel in kernels:
            seen = set()
            for tile in TILES:
                os.environ["MSCRED_PHASE_DGRAD_TILE"] = tile
                bm, bn, _, warps = strided_conv.launch_blocks(kernel, O, s * s * C if kernel == "columns" else C)
                tile = f"{bm}/{bn}/{warps}"  # (as launched: columns beyond the matrix's are cut, so timed once)
                if tile in seen:
                    continue
                seen.add(tile)
                call = (lambda: strided_conv.dgrad(dy, w, shape, s, (0, 0), transposed, kernel=kernel))
                try:
                    out = call()  # (compiles the tile outside the capture)
                    ms = median_event_ms(_graphed(call, ()).replay, iters=20)
                except Exception as err:  # (a tile the device refuses: recorded, the others still timed)
                    rows.append(dict(shape=name, form=kernel, tile=tile, ms=float("nan"), tflops=float("nan"),
                                     rel_diff=float("nan"), error=(str(err).splitlines() or [""])[0]))
                    print(rows[-1], flush=True)
                    continue
                rows.append(dict(shape=name, form=kernel, tile=tile, ms=ms, tflops=flop / ms / 1e9,
                                 rel_diff=_rel_diff([out], [ref])))
                print(rows[-1], flush=True)
        os.environ.pop("MSCRED_PHASE_DGRAD_TILE", None)
        report(args.out, rows)  # after each shape: a run cut short keeps what it measured


def report(out: str, rows: list[dict]) -> None:
    lines = ["| shape | form | tile (rows/columns/warps) | us | TFLOP/s | rel. diff from cuDNN |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['shape']} | {r['form']} | {r['tile']} | failed: {r['error']} | | |" if "error" in r else
              f"| {r['shape']} | {r['form']} | {r['tile']} | {1000 * r['ms']:.1f} | {r['tflops']:.0f} | "
              f"{r['rel_diff']:.1e} |" for r in rows]
    meta = f"{sweep_report.machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/bench_strided_conv.py`."
    sweep_report.write(out, "strided_conv", meta, rows,
                       ["# Strided convolutions: our Triton GEMMs against cuDNN", "", meta, ""] + lines)


if __name__ == "__main__":
    main()
