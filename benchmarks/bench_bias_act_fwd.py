"""bias_act's forward kernel alone, per call shape of the model, with each launch variant: where its time goes.

Why: at the scoring batch the kernel reaches 37% of the measured copy rate, and in the training step its bordered
[640, 64, 15, 15] call takes 22.3 us against ~9 us for its bytes (docs/kernel-experiments.md, the bias_act lead).
Two things could hold it there: the bytes each thread has in flight (one 8-byte load of y for 4 elements at the
default 1024-element x 8-warp tile) and the instructions (two integer divisions by the map's runtime sizes, ~30 of
176 a thread, results/bias_act_sass/). The variants: the tile (elements per program / warps: 8 elements and one
16-byte load a thread at 2048 / 8; more threads a program at 2048 / 16) x the sizes at run time
(MSCRED_BIAS_ACT_CONST_SIZES=0) or as constants (``bias_act.const_sizes``, the default since this sweep).

Each (shape, variant): 10 calls captured in a CUDA graph, cycling over 8 distinct input / output pairs (more than
the 50 MB L2 holds at every shape, so that the reads come from HBM as in the model), median of 30 replays; the
bytes moved (y read, out written) over that time, against the H200's measured 4.26 TB/s copy rate (README's bench
table); every output equal to the first variant's (a tile or a constant does not change the arithmetic).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_bias_act_fwd.py [--out DIR]
       PYTHONPATH=src python3 benchmarks/bench_bias_act_fwd.py --launch SHAPE  (10 calls of shape index SHAPE with
       the variables set in the environment: what benchmarks/gpu_bias_act_ncu.sh profiles)
Writes DIR/bias_act_fwd.md and .json (DIR: benchmarks/results/bias_act_fwd).
"""
from __future__ import annotations

import argparse
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms  # noqa: E402

COPY_TB_S = 4.26  # the H200's measured device-to-device copy rate (README, the bench table's floor row)
PAIRS, CALLS = 8, 10
# (label, y shape, out_pads): the scoring calls of the encoder (3,595 segments, no border) and the training
# encoder's (batch 640 = 128 windows x 5 steps, written inside the ConvLSTM's zero border: bottom and right)
SHAPES = (("scoring conv2", (3595, 64, 15, 15), (0, 0, 0, 0)),
          ("scoring conv3", (3595, 128, 8, 8), (0, 0, 0, 0)),
          ("scoring conv4", (3595, 256, 4, 4), (0, 0, 0, 0)),
          ("training conv2", (640, 64, 15, 15), (0, 1, 0, 1)),
          ("training conv3", (640, 128, 8, 8), (0, 1, 0, 1)),
          ("training conv4", (640, 256, 4, 4), (0, 1, 0, 1)))
# (label, environment); the first is the one the others are compared with (the default until 2026-12-02; since
# then constant sizes are the default, results/bias_act_fwd/ has this sweep's first run)
RUNTIME = {"MSCRED_BIAS_ACT_CONST_SIZES": "0"}
VARIANTS = (("1024 / 8, runtime sizes", RUNTIME),
            ("1024 / 8, constant sizes (default)", {}),
            ("2048 / 8", {"MSCRED_BIAS_ACT_FWD_TILE": "2048/8", **RUNTIME}),
            ("2048 / 8, constant sizes", {"MSCRED_BIAS_ACT_FWD_TILE": "2048/8"}),
            ("2048 / 16", {"MSCRED_BIAS_ACT_FWD_TILE": "2048/16", **RUNTIME}),
            ("2048 / 16, constant sizes", {"MSCRED_BIAS_ACT_FWD_TILE": "2048/16"}),
            ("512 / 4, constant sizes", {"MSCRED_BIAS_ACT_FWD_TILE": "512/4"}))
SETTINGS = ("MSCRED_BIAS_ACT_FWD_TILE", "MSCRED_BIAS_ACT_CONST_SIZES")


def make_pairs(shape, pads, pairs: int = PAIRS):
    """``pairs`` (y, bias, out) of a bf16 channels-last call, out bordered by ``pads`` (top, bottom, left, right)."""
    B, C, H, W = shape
    torch.manual_seed(0)
    bias = torch.randn(C, device="cuda")
    made = []
    for _ in range(pairs):
        y = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        out = torch.empty(B, C, H + pads[0] + pads[1], W + pads[2] + pads[3], device="cuda", dtype=torch.bfloat16,
                          memory_format=torch.channels_last)
        made.append((y, bias, out))
    return made


def calls(pairs, pads, n: int = CALLS):
    """A function making ``n`` forward calls cycling over ``pairs`` (the op's own kernel launch)."""
    from mscred.ops.triton import bias_act

    H, W = pairs[0][0].shape[2:]
    window = (pads[0], pads[2], H, W) if any(pads) else None

    def run():
        for i in range(n):
            y, bias, out = pairs[i % len(pairs)]
            bias_act._forward_into(y, bias, True, 0, 0, out, 1, window)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/bias_act_fwd")
    ap.add_argument("--launch", type=int, help="only make 10 calls of this shape index (for Nsight Compute)")
    args = ap.parse_args()
    if args.launch is not None:
        _, shape, pads = SHAPES[args.launch]
        calls(make_pairs(shape, pads, 2), pads)()
        torch.cuda.synchronize()
        return
    rows = []
    for label, shape, pads in SHAPES:
        pairs = make_pairs(shape, pads)
        y, _, out = pairs[0]
        moved = (y.numel() + out.numel()) * 2  # bytes of one call: y read, out written (bf16)
        first = None
        for name, env in VARIANTS:
            saved = {k: os.environ.pop(k, None) for k in SETTINGS}
            os.environ.update(env)
            try:
                ms = graph_ms(calls(pairs, pads)) / CALLS
                calls(pairs[:1], pads, 1)()
                result = pairs[0][2].clone()
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None)
                    if v is not None:
                        os.environ[k] = v
            first = first or (ms, result)
            rows.append(dict(call=label, shape=list(shape), pads=list(pads), variant=name, us=round(ms * 1e3, 2),
                             tb_s=round(moved / ms / 1e9, 2), of_copy=round(moved / ms / 1e9 / COPY_TB_S, 3),
                             speedup=round(first[0] / ms, 3), same=bool(torch.equal(result, first[1]))))
            print(rows[-1], flush=True)
    sweep_report.table(
        args.out, "bias_act_fwd", "bench_bias_act_fwd.py",
        "bias_act's forward kernel per call shape and launch variant",
        f"{CALLS} calls a CUDA graph over {PAIRS} input / output pairs, median of 30 replays; bf16, channels-last, "
        "SELU. Bytes: y read + out written; copy rate 4.26 TB/s.",
        ["call", "y", "variant", "us a call", "TB/s", "of copy rate", "vs first", "same output"], rows,
        lambda r: (r["call"], tuple(r["shape"]), r["variant"], r["us"], r["tb_s"], f"{r['of_copy']:.0%}",
                   f"{r['speedup']:.2f}x", r["same"]))


if __name__ == "__main__":
    main()
