"""conv1's weight gradient: the CUDA kernel (``ops/small_conv_wgrad``) against the Triton kernel, at the training
step's call, in one process.

The call as the graphed bf16 step makes it (batch 128 x 5 steps = 640 images of 30 x 30): x (640, 3, 30, 30)
channels-last; dout, the second gradient (level 1's) and the output as interiors of zero-bordered (31 x 31 storage)
channels-last buffers of 32 channels (strides (30752, 1, 992, 32), as results/small_conv_wgrad_ncu/ printed them);
SELU. ``small_conv_fused_backward`` (need_dx False) is captured in a CUDA graph under each kernel
(MSCRED_SMALL_CONV_WGRAD_CUDA=0 for Triton) and its replays timed, the two alternating for ROUNDS rounds (CUDA-event
medians of 20 after 5 warm-ups; --blocks: the CUDA kernel's grid at several blocks an SM); the results' largest difference is printed beside (relative to the largest
magnitude). Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_conv1_wgrad_cuda.py [--out DIR] [--rounds N]
Writes DIR/conv1_wgrad_cuda.md.
"""
from __future__ import annotations

import argparse
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed, _rel_diff  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

SWITCH = "MSCRED_SMALL_CONV_WGRAD_CUDA"


def step_call():
    """The training step's conv1 backward arguments (dout, x, weight, out, selu, need_dx, dout2)."""
    gen = torch.Generator().manual_seed(0)

    def bordered():
        full = torch.randn(640, 32, 31, 31, generator=gen).to("cuda", torch.bfloat16).contiguous(
            memory_format=torch.channels_last)
        return full[:, :, 1:, 1:]
    x = torch.randn(640, 3, 30, 30, generator=gen).to("cuda", torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    weight = torch.randn(32, 3, 3, 3, generator=gen).to("cuda", torch.bfloat16)
    return bordered(), x, weight, bordered(), True, False, bordered()


def main() -> None:
    from mscred.ops import small_conv_wgrad
    from mscred.ops.triton import small_conv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/conv1_wgrad_cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--blocks", default="0", help="comma-separated blocks an SM of the CUDA kernel (0: its default)")
    args = ap.parse_args()
    call = step_call()
    dout, x, weight, out, _, _, dout2 = call
    assert small_conv_wgrad.runs(x, tuple(weight.shape), dout, dout2, out), "the CUDA kernel does not take the call"
    op = small_conv.small_conv_fused_backward
    graphs, results = {}, {}
    variants = [("triton", "0", "0")] + [(f"cuda, {b} blocks an SM" if b != "0" else "cuda", "1", b)
                                         for b in args.blocks.split(",")]
    for name, switch, blocks in variants:
        os.environ[SWITCH] = switch
        os.environ["MSCRED_SMALL_CONV_WGRAD_CUDA_BLOCKS"] = blocks
        results[name] = [t.clone() for t in op(*call)]  # also compiles / builds outside the capture
        graphs[name] = _graphed(op, call)
    os.environ.pop(SWITCH)
    os.environ.pop("MSCRED_SMALL_CONV_WGRAD_CUDA_BLOCKS")
    times = {name: [] for name, _, _ in variants}
    for _ in range(args.rounds):
        for name in times:
            times[name].append(median_event_ms(graphs[name].replay, iters=20) * 1000)
    diff = max(_rel_diff(results[name], results["triton"]) for name in results)
    nbytes = sum(t.numel() * t.element_size() for t in (dout, dout2, out, x))
    meta = (f"{sweep_report.machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/bench_conv1_wgrad_cuda.py "
            f"--rounds {args.rounds} --blocks {args.blocks}`.")
    lines = ["# conv1's weight gradient at the training step's call: CUDA kernel against Triton", "", meta, "",
             f"Inputs read: {nbytes / 1e6:.1f} MB. Largest difference of the two results (dx, dweight, dbias), "
             f"relative: {diff:.1e}.", "", "| kernel | us a call (graph replay), per round | best | GB/s at best |",
             "| --- | --- | --- | --- |"]
    for name, ts in times.items():
        lines.append(f"| {name} | {' / '.join(f'{t:.1f}' for t in ts)} | {min(ts):.1f} | "
                     f"{nbytes / min(ts) / 1e3:.0f} |")
    rows = [dict(kernel=k, us=v) for k, v in times.items()]
    sweep_report.write(args.out, "conv1_wgrad_cuda", meta, rows, lines)


if __name__ == "__main__":
    main()
