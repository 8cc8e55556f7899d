"""What sets the ~60 us of conv1's weight gradient alone: the readings of docs/training-kernel-plan.md (conv1's
paragraph of 2026-12-04, afternoon), measured on one call of the training step's layout in one process.

The call: x (640, 3, 30, 30) channels-last bf16; dout, level 1's gradient and
the output as interiors of zero-bordered (31 x 31 storage) channels-last buffers of 32 channels (the strides the
step's tensors have, results/small_conv_wgrad_ncu/); SELU. Rows, each in us a call:
- "alone, synchronized": the op's graph replayed with a synchronize after each replay (as bench_bwd_tiles.py and
  the earlier rounds timed it; the GPU idles between calls);
- "back to back": the same graph replayed 20 times without a synchronize (``step_alternation.median_ms``), as the
  step runs its kernels;
- "maps in buffers of their own size": the three maps copied into fresh unbordered channels-last tensors (other
  sizes, other offsets from each other), back to back -- if the three same-layout buffers read in lockstep cost
  DRAM efficiency, this row is faster;
- "without level 1's gradient" / "without SELU": one map fewer read (the tail's share if level 1's half of the
  product ran earlier on the side stream; and without the output) -- what the kernel's time does with its bytes;
- "plain read of the three maps": a float32 sum of each bordered view (PyTorch reductions), graphed, back to back:
  the rate these views can be read at by kernels not ours.
Each row's bytes and rate beside it. Usage (CUDA machine): PYTHONPATH=src python3
benchmarks/conv1_wgrad_readings.py [--out DIR] [--rounds N]. Writes DIR/conv1_wgrad_readings.md.
"""
from __future__ import annotations

import argparse

import torch

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

N, C, H, W = 640, 32, 30, 30


def bordered(gen: torch.Generator, shape: tuple[int, int, int, int], device: str, dtype: torch.dtype
             ) -> torch.Tensor:
    """(n, c, h, w): the interior of a channels-last (n, c, h + 1, w + 1) buffer, as the step's conv1 maps."""
    n, c, h, w = shape
    full = torch.randn(n, c, h + 1, w + 1, generator=gen).to(device, dtype).contiguous(
        memory_format=torch.channels_last)
    return full[:, :, 1:, 1:]


def calls(shape=(N, C, H, W), device: str = "cuda", dtype: torch.dtype = torch.bfloat16):
    """[(row name, callable, bytes it reads)]: the rows of the table below except the synchronized one, each a
    call of the op (or the plain read) on tensors of the step's layout at ``shape`` (smaller on a CPU, where
    tests/test_bench_conv1_readings.py runs each once under Triton's interpreter)."""
    from mscred.ops.triton import small_conv

    n, c, h, w = shape
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, h, w, generator=gen).to(device, dtype).contiguous(memory_format=torch.channels_last)
    weight = torch.randn(c, 3, 3, 3, generator=gen).to(device, dtype)
    dout, dout2, out = (bordered(gen, shape, device, dtype) for _ in range(3))
    own = [t.contiguous(memory_format=torch.channels_last) for t in (dout, dout2, out)]
    op = small_conv.small_conv_fused_backward
    map_bytes, x_bytes = dout.numel() * dout.element_size(), x.numel() * x.element_size()

    def call(d, o, d2, selu=True):
        return lambda: op(d, x, weight, o, selu, False, d2)
    return [("back to back", call(dout, out, dout2), 3 * map_bytes + x_bytes),
            ("maps in buffers of their own size", call(own[0], own[2], own[1]), 3 * map_bytes + x_bytes),
            ("without level 1's gradient", call(dout, out, None), 2 * map_bytes + x_bytes),
            ("without SELU (the output not read)", call(dout, out, dout2, selu=False), 2 * map_bytes + x_bytes),
            ("plain read of the three maps (PyTorch sums)",
             lambda: [t.sum(dtype=torch.float32) for t in (dout, dout2, out)], 3 * map_bytes)]


def graph_of(fn) -> torch.cuda.CUDAGraph:
    fn()  # compiles outside the capture
    return _graphed(fn, ())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/conv1_wgrad_readings")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rows = []  # (name, graph, bytes, synchronized): the first call's graph also timed with a synchronize each
    for name, fn, nbytes in calls():
        graph = graph_of(fn)
        if not rows:
            rows.append(("alone, synchronized", graph, nbytes, True))
        rows.append((name, graph, nbytes, False))
    times = {name: [] for name, *_ in rows}
    for _ in range(args.rounds):  # the rows in turn, every round
        for name, graph, _, synchronized in rows:
            ms = (median_event_ms(graph.replay, iters=20) if synchronized
                  else step_alternation.median_ms(graph.replay, 20, 5))
            times[name].append(ms * 1000)
    from sweep_report import machine_line  # noqa: E402

    lines = ["# conv1's weight gradient at the step's layout: what sets its time", "",
             f"{machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/conv1_wgrad_readings.py --rounds "
             f"{args.rounds}`.", "", "| row | us a call, per round | best | MB read | TB/s at best |",
             "| --- | --- | --- | --- | --- |"]
    for name, _, nbytes, _ in rows:
        ts = times[name]
        lines.append(f"| {name} | {' / '.join(f'{t:.1f}' for t in ts)} | {min(ts):.1f} | {nbytes / 1e6:.1f} | "
                     f"{nbytes / min(ts) / 1e6:.2f} |")
    step_alternation.report(args.out, "conv1_wgrad_readings.md", lines)


if __name__ == "__main__":
    main()
