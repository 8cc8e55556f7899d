"""deconv1's forward (64 -> 3, 3 x 3) with the taps beside the output channels (``ops/triton/small_conv_taps.py``)
against the generic small-channel forward it replaced, on the model's own calls.

The calls are recorded as ``bench_small_tiles.record_calls`` records them (the thesis workload's scoring call,
3,591 windows, and one training forward at batch 128, bf16, fused backend), with their tensors; each
small-channel forward call whose layer the taps form takes is replayed in a CUDA graph, 20 replays back to back
(median of 5), with MSCRED_SMALL_CONV_FWD_TAPS=1 and =0, rounds in alternation. The outputs are compared: the two
forms sum the same float32 products in another order, so they agree to the output dtype's rounding, not bit for bit.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_small_conv_taps.py [--rounds N] [--out DIR]
Writes DIR/small_conv_taps.md.
"""
from __future__ import annotations

import argparse
import os

import torch

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed  # noqa: E402
from bench_small_tiles import _shape, record_calls  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/small_conv_taps")
    args = ap.parse_args()
    from mscred.ops.triton import small_conv_taps

    calls = [(phase, fn, a) for kind, phase, fn, a in record_calls()
             if kind == "small_conv" and small_conv_taps.suits(a[0].shape[1], a[1].shape[0], a[1].shape[-1])]
    rows = []  # (phase, shapes, {variant: graph}, max abs difference of the outputs)
    for phase, fn, call_args in calls:
        graphs, outs = {}, {}
        for variant in ("1", "0"):
            os.environ["MSCRED_SMALL_CONV_FWD_TAPS"] = variant
            outs[variant] = fn(*call_args).clone()
            graphs[variant] = _graphed(lambda: fn(*call_args), ())
        os.environ.pop("MSCRED_SMALL_CONV_FWD_TAPS", None)
        diff = (outs["1"].float() - outs["0"].float()).abs().max().item()
        rows.append((phase, _shape("small_conv", call_args), graphs, diff))
    times = {(i, v): [] for i in range(len(rows)) for v in ("1", "0")}
    for _ in range(args.rounds):
        for i, (_, _, graphs, _) in enumerate(rows):
            for variant, graph in graphs.items():
                times[(i, variant)].append(step_alternation.median_ms(graph.replay, 20, 5) * 1000)
    from sweep_report import machine_line  # noqa: E402

    lines = ["# deconv1's forward: taps beside the output channels (two kernels) vs the generic gather", "",
             f"{machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/bench_small_conv_taps.py --rounds "
             f"{args.rounds}`. Each call graphed, 20 replays back to back, median of 5, rounds in alternation.", "",
             "| phase | call | taps (us, per round) | generic (us, per round) | best taps / generic | max abs diff |",
             "| --- | --- | --- | --- | --- | --- |"]
    for i, (phase, shape, _, diff) in enumerate(rows):
        taps, generic = times[(i, "1")], times[(i, "0")]
        lines.append(f"| {phase} | {shape} | {' / '.join(f'{t:.1f}' for t in taps)} | "
                     f"{' / '.join(f'{t:.1f}' for t in generic)} | {min(taps):.1f} / {min(generic):.1f} = "
                     f"{min(taps) / min(generic):.2f}x | {diff:.2e} |")
    step_alternation.report(args.out, "small_conv_taps.md", lines)


if __name__ == "__main__":
    main()
