"""Does programmatic dependent launch (PDL) shorten a chain of dependent Triton kernels in a CUDA graph on Hopper?

The fused training step is a chain of ~200 kernels, many of them a few microseconds long (the ConvLSTM's per-step
cell kernels, levels 3-4's recurrent steps, the attention's two passes). With PDL a kernel is launched while its
predecessor still runs (``launch_pdl=True``); its programs wait for the predecessor's memory at ``gdc_wait`` and may
let the next kernel launch early with ``gdc_launch_dependents``. What that buys is the launch and block-dispatch
latency between two kernels. This script measures it on chains shaped like the step's: N dependent elementwise
kernels over a buffer the size of level 1's and level 3's cell tensors, captured in one CUDA graph, replayed, with

- ``off``: plain launches (as the step today);
- ``wait``: PDL launches, each program waiting at its top, dependents let go at the top too (the most overlap of
  launch latency, no work moved before the wait);
- ``wait-end``: PDL launches, dependents let go after the program's stores (what a kernel with a long tail could do).

The result is the time per kernel of each variant; each variant's output is compared with the plain chain's
(bit for bit: the same arithmetic). Usage (a CUDA machine with Triton >= 3.4): python benchmarks/bench_pdl.py --out DIR
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

import bench_conv  # noqa: E402 (benchmarks/ is the script's own folder)


@triton.jit
def _step_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, PDL: tl.constexpr, LET_GO_EARLY: tl.constexpr):
    # y = 0.5 * x + 1 (a chain: kernel i reads what kernel i - 1 wrote)
    if PDL:
        tl.extra.cuda.gdc_wait()
        if LET_GO_EARLY:
            tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (0.5 * x + 1.0).to(y_ptr.dtype.element_ty), mask=mask)
    if PDL:
        if not LET_GO_EARLY:
            tl.extra.cuda.gdc_launch_dependents()


def _chain(bufs, kernels: int, variant: str, block: int) -> None:
    n = bufs[0].numel()
    grid = (triton.cdiv(n, block),)
    pdl = variant != "off"
    for i in range(kernels):
        src, dst = bufs[i % 2], bufs[(i + 1) % 2]
        extra = {"launch_pdl": True} if pdl else {}
        _step_kernel[grid](src, dst, n, BLOCK=block, PDL=pdl, LET_GO_EARLY=variant == "wait", num_warps=4, **extra)


def _time_graph(fn, replays: int = 200, rounds: int = 5) -> float:
    """Median over rounds of the mean replay time of fn's graph, microseconds."""
    graph = bench_conv.capture(fn)
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        graph.replay()
        torch.cuda.synchronize()
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / replays)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kernels", type=int, default=40)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from triton.backends.nvidia.compiler import CUDAOptions
    if "launch_pdl" not in {f.name for f in dataclasses.fields(CUDAOptions)}:
        raise SystemExit(f"triton {triton.__version__} has no PDL launch option")
    # element counts: level 1's cell tensor (128 x 32 x 30 x 30), level 3's (128 x 128 x 8 x 8), a tiny one
    sizes = {"level1 (3.7 M bf16)": 128 * 32 * 30 * 30, "level3 (1.0 M bf16)": 128 * 128 * 8 * 8,
             "tiny (64 K bf16)": 64 * 1024}
    rows, raw = [], {}
    for label, n in sizes.items():
        bufs = [torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        results = {}
        for variant in ("off", "wait", "wait-end"):
            start = bufs[0].clone()

            def fn(v=variant):
                _chain(bufs, args.kernels, v, 1024)

            us = _time_graph(fn)
            bufs[0].copy_(start)
            _chain(bufs, args.kernels, variant, 1024)
            torch.cuda.synchronize()
            results[variant] = (us, bufs[args.kernels % 2].clone())
            bufs[0].copy_(start)
        base_us, base_out = results["off"]
        for variant, (us, out) in results.items():
            same = bool(torch.equal(out, base_out))
            rows.append(f"| {label} | {variant} | {us:.1f} | {us / args.kernels:.2f} | "
                        f"{(base_us - us) / args.kernels:+.2f} | {'yes' if same else 'NO'} |")
            raw[f"{label}/{variant}"] = {"graph_us": us, "per_kernel_us": us / args.kernels, "same_as_off": same}
    text = "\n".join([
        f"# PDL on a chain of {args.kernels} dependent kernels, one CUDA graph (bench_pdl.py)", "",
        f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}", "",
        "| buffer | variant | graph replay us | us a kernel | saved a kernel, us | output as off |",
        "| --- | --- | --- | --- | --- | --- |", *rows, ""])
    (args.out / "pdl_chain.md").write_text(text)
    (args.out / "pdl_chain.json").write_text(json.dumps(raw, indent=1))
    print(text)


if __name__ == "__main__":
    main()
