"""Adam's step on the default model's parameters laid out as the fused bf16 training step lays them: torch's fused
Adam against ``PackedAdam`` (``ops/triton/adam.py``), each step captured in a CUDA graph and replayed back to back.

The layout: the 12 convolution weights (3.2 M elements) views of one float32 buffer, their gradients views of
another (as the weight cache's backward writes them), the 12 biases and their gradients tensors of their own.
Both optimizers are capturable, start from the same values and take the same gradients; the rows say how far
apart their parameters are after the timed steps (float32 rounding: the two compute 1 - beta ** step differently)
and how many elements the packed one's kernel covered. ``--tiles`` times the kernel's other launch tiles
(MSCRED_ADAM_TILE, "BLOCK/warps"). Usage (CUDA machine):
    PYTHONPATH=src python3 benchmarks/bench_packed_adam.py [--tiles 1024/4,2048/8] [--out DIR]
Writes DIR/packed_adam.md.
"""
from __future__ import annotations

import argparse
import os

import torch

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)
from mscred.config import ModelConfig  # noqa: E402
from mscred.model import MSCREDNet  # noqa: E402
from mscred.packed_adam import PackedAdam  # noqa: E402


def layout(device: str, seed: int = 0):
    """(parameters, gradients): the default model's shapes, weights packed, biases apart (module doc)."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(name, p.shape) for name, p in MSCREDNet(ModelConfig(backend="fused")).named_parameters()]
    weights = [(n, s) for n, s in shapes if n.endswith("weight")]
    total = sum(s.numel() for _, s in weights)
    buf, gbuf = (torch.randn(total, generator=gen).to(device) * 0.05 for _ in range(2))
    params, grads, at = {}, {}, 0
    for name, shape in weights:
        params[name] = torch.nn.Parameter(buf[at:at + shape.numel()].view(shape))
        grads[name] = gbuf[at:at + shape.numel()].view(shape)
        at += shape.numel()
    for name, shape in shapes:
        if name not in params:
            params[name] = torch.nn.Parameter(torch.randn(shape, generator=gen).to(device) * 0.05)
            grads[name] = torch.randn(shape, generator=gen).to(device)
    order = [name for name, _ in shapes]  # the module's order: weight, bias, weight, ...
    return [params[n] for n in order], [grads[n] for n in order]


def graphed_steps(opt, params, grads) -> torch.cuda.CUDAGraph:
    """opt.step() in a graph (after three warm-up steps on a side stream, as GraphedStep warms up)."""
    for p, g in zip(params, grads):
        p.grad = g
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    return graph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="1024/4,2048/8,512/4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/packed_adam")
    args = ap.parse_args()
    variants = [("torch fused Adam (capturable)", None)] + [(f"PackedAdam, tile {t}", t)
                                                            for t in args.tiles.split(",")]
    rows = []
    for name, tile in variants:
        params, grads = layout("cuda")
        if tile is None:
            opt = torch.optim.Adam(params, lr=2e-4, capturable=True, fused=True)
        else:
            os.environ["MSCRED_ADAM_TILE"] = tile
            opt = PackedAdam(params, lr=2e-4, capturable=True, fused=True)
        rows.append((name, opt, params, graphed_steps(opt, params, grads)))
        os.environ.pop("MSCRED_ADAM_TILE", None)
    times = {name: [] for name, *_ in rows}
    for _ in range(args.rounds):
        for name, _, _, graph in rows:
            times[name].append(step_alternation.median_ms(graph.replay, 20, 5) * 1000)
    base = rows[0][2]
    from sweep_report import machine_line  # noqa: E402

    lines = ["# Adam's step on the default model's parameters as the fused bf16 step lays them out", "",
             f"{machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/bench_packed_adam.py --tiles "
             f"{args.tiles} --rounds {args.rounds}`. Each step graphed, 20 replays back to back, median of 5; "
             f"3.2 M parameters, 24 tensors.", "",
             "| variant | us a step, per round | best | elements by our kernel | max abs diff from torch's params |",
             "| --- | --- | --- | --- | --- |"]
    for name, opt, params, _ in rows:
        ts = times[name]
        diff = max((p - b).abs().max().item() for p, b in zip(params, base))
        covered = getattr(opt, "kernel_elements", 0)
        lines.append(f"| {name} | {' / '.join(f'{t:.1f}' for t in ts)} | {min(ts):.1f} | {covered:,} | "
                     f"{diff:.2e} |")
    step_alternation.report(args.out, "packed_adam.md", lines)


if __name__ == "__main__":
    main()
