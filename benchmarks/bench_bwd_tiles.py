"""Backward tiles of the bias + SELU kernel and of the small-channel convolution's weight gradient, on the training
step's own calls.

One eager fused bf16 training step at batch 128 (the Trainer's EagerStep, as bench_train.py builds it) is run with
``bias_act.bias_act_fused_backward`` and ``small_conv.small_conv_fused_backward`` recorded -- every call with its
tensors -- then each call is replayed alone under every launch setting, through the environment overrides the ops
read per call: ``MSCRED_BIAS_ACT_BWD_TILE`` = elements per tile / warps / tiles per program, and
``MSCRED_SMALL_CONV_WGRAD_TILE`` = pixels per tile / warps / programs per SM. Each call under each setting is
captured in a CUDA graph and its replays timed (CUDA-event medians of 20 after 5 warm-ups): the GPU time of the
op's kernels, without the ~0.1-0.3 ms of host dispatch per op call that timing the eager calls measured instead
(this script's first run, benchmarks/results/bwd_tiles/). Against the first setting (the defaults before the
sweep). The outputs may differ in the last bits
(the bias and weight gradients are sums of atomic adds, whose order changes with the programs): each is compared
with the first setting's, largest difference relative to that output's largest magnitude.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_bwd_tiles.py [--out DIR] [--kernel KIND]
[--settings A,B,...] (one kernel's calls only, under these settings, the first the one the others are compared with)
Writes DIR/bwd_tiles.md, DIR/bwd_tiles.json and DIR/best_tiles.env (the fastest setting of each kernel in sum over
its calls, as VAR=VALUE lines).
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys

import torch

import bench_train as bt  # noqa: E402 (benchmarks/ is the script's own folder)
import sweep_report  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

BATCH = 128
SETTINGS = {
    "bias_act": ("MSCRED_BIAS_ACT_BWD_TILE",
                 ["2048/4/8", *(f"{b}/{w}/{t}" for b, w, t in itertools.product((1024, 2048, 4096), (4, 8),
                                                                              (1, 4, 8, 16))
                                if (b, w, t) != (2048, 4, 8))]),
    "small_conv": ("MSCRED_SMALL_CONV_WGRAD_TILE",
                   ["128/4/4", *(f"{b}/{w}/{p}" for b, w, p in itertools.product((64, 128, 256), (4, 8),
                                                                                (2, 4, 8, 16))
                                 if (b, w, p) != (128, 4, 4))]),
}


def record_calls():
    """[(kind, op, args)] of every bias_act / small_conv backward of one eager fused bf16 training step."""
    from mscred.ops.triton import bias_act, small_conv

    step, _, idx = bt.thesis_eager_step(BATCH)
    calls = []
    # The ops' autograd formulas look these module attributes up at call time.
    real = {"bias_act": (bias_act, "bias_act_fused_backward"), "small_conv": (small_conv, "small_conv_fused_backward")}

    def recorder(kind, op):
        def run(*args):
            calls.append((kind, op, args))
            return op(*args)
        return run
    originals = {kind: getattr(module, name) for kind, (module, name) in real.items()}
    for kind, (module, name) in real.items():
        setattr(module, name, recorder(kind, originals[kind]))
    try:
        step(idx)
        torch.cuda.synchronize()
    finally:
        for kind, (module, name) in real.items():
            setattr(module, name, originals[kind])
    return calls


def _shape(kind: str, args) -> str:
    if kind == "bias_act":
        dout, out = args[0], args[1]
        return (f"dout {tuple(dout.shape)}, out {tuple(out.shape)}, crop at ({args[4]}, {args[5]}) of "
                f"{args[6]}x{args[7]}")
    dout, x, w = args[0], args[1], args[2]
    return f"x {tuple(x.shape)}, w {tuple(w.shape)}, dx {'yes' if args[5] else 'no'}"


def _graphed(op, args) -> torch.cuda.CUDAGraph:
    """One call of ``op(*args)`` captured in a CUDA graph (outputs in the graph's private pool)."""
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(*args)
    return graph


def _rel_diff(a, b) -> float:
    """Largest difference over ``b``'s largest magnitude, over every tensor of two outputs."""
    worst = 0.0
    for x, y in zip(a, b):
        if x.numel():
            worst = max(worst, ((x.float() - y.float()).abs().max() / y.float().abs().max().clamp_min(1e-30)).item())
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/bwd_tiles")
    ap.add_argument("--kernel", choices=sorted(SETTINGS), help="only this kernel's calls")
    ap.add_argument("--settings", help="comma-separated launch settings of --kernel, instead of the sweep's")
    args = ap.parse_args()
    if args.settings:
        if not args.kernel:
            ap.error("--settings needs --kernel")
        SETTINGS[args.kernel] = (SETTINGS[args.kernel][0], args.settings.split(","))
    rows = []
    for i, (kind, op, call_args) in enumerate(record_calls()):
        if args.kernel and kind != args.kernel:
            continue
        variable, settings = SETTINGS[kind]
        ref = None
        for setting in settings:
            os.environ[variable] = setting
            out = [t.clone() for t in op(*call_args)]  # also compiles the setting's kernel outside the capture
            ref = out if ref is None else ref
            rows.append(dict(call=i, kind=kind, shape=_shape(kind, call_args), setting=setting,
                             ms=median_event_ms(_graphed(op, call_args).replay, iters=20),
                             rel_diff=_rel_diff(out, ref)))
            print(rows[-1], flush=True)
        del os.environ[variable]
    meta = (f"{sweep_report.machine_line()}. The first setting of each kernel is its default before this sweep. "
            f"Command: `PYTHONPATH=src python3 benchmarks/bench_bwd_tiles.py {' '.join(sys.argv[1:])}`.")
    lines = ["# bias_act backward and small_conv weight-gradient launch settings on the training step's calls", "",
             meta, "", "| call | kernel | shapes | setting | ms | vs first | largest difference (relative) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["call"] == r["call"])
        lines.append(f"| {r['call']} | {r['kind']} | {r['shape']} | {r['setting']} | {r['ms']:.4f} | "
                     f"{base / r['ms']:.2f}x | {r['rel_diff']:.1e} |")
    totals: dict[tuple[str, str], float] = {}
    for r in rows:
        totals[(r["kind"], r["setting"])] = totals.get((r["kind"], r["setting"]), 0.0) + r["ms"]
    lines += ["", "Sums over the step's calls (ms):", "", "| kernel | setting | ms | vs first |",
              "| --- | --- | --- | --- |"]
    best = {}
    for kind, (variable, settings) in SETTINGS.items():
        if (kind, settings[0]) not in totals:
            continue
        base = totals[(kind, settings[0])]
        for s in settings:
            lines.append(f"| {kind} | {s} | {totals[(kind, s)]:.4f} | {base / totals[(kind, s)]:.2f}x |")
        best[variable] = min(settings, key=lambda s: totals[(kind, s)])
    sweep_report.write(args.out, "bwd_tiles", meta, rows, lines)
    with open(os.path.join(args.out, "best_tiles.env"), "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in best.items())


if __name__ == "__main__":
    main()
