"""The reference ConvLSTM's per-step input slices: ``x[:, t]`` (before 2026-12-02) against ``x.unbind(1)`` (now), on
the CPU, forward + backward of levels 1-2 at batch 32, alternating, same process.

Why: each ``x[:, t]``'s backward (select_backward) zero-fills a gradient of x's whole size and autograd adds the T
of them; unbind's backward stacks the T slices once. The outputs and gradients are checked bit-equal; one training
step of the default model is profiled with each (its self CPU time and the zero-fills' share).

Usage: PYTHONPATH=src python3 benchmarks/bench_reference_unbind.py [--repeats 9] [--out DIR]
Writes DIR/reference_unbind.md and .json (DIR: benchmarks/results/reference_unbind).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_signature import machine  # the CPU's name as the other CPU benchmarks report it
from mscred.ops import reference as ref


def select_per_step(x, weight, bias, forget_bias):
    """``reference.convlstm`` as it was before: the input of step t as x[:, t]."""
    B, T, C, H, W = x.shape
    top, bottom, left, right = ref.same_padding(H, weight.shape[-1], 1)
    h = x.new_zeros(B, weight.shape[0] // 4, H, W)
    c = x.new_zeros(B, weight.shape[0] // 4, H, W)
    outputs = []
    for t in range(T):
        xh = F.pad(torch.cat([x[:, t], h], dim=1), (left, right, top, bottom))
        h, c = ref.cell_update(F.conv2d(xh, weight, bias), c, forget_bias)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def _step_profiles() -> list[dict]:
    """One CPU training step of the default model at batch 32 (the Trainer's EagerStep, Adam) under the profiler
    with each implementation as the reference ConvLSTM: the step's self CPU time and its zero-fills'."""
    import mscred.ops as ops
    from torch.profiler import ProfilerActivity, profile

    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet
    from mscred.train import WindowDataset
    from mscred.train_graphs import EagerStep

    segments = torch.rand(260, 3, 30, 30, generator=torch.Generator().manual_seed(1))
    data, idx = WindowDataset(segments, steps=5), torch.arange(32)
    rows = []
    for name, fn in (("x[:, t]", select_per_step), ("unbind", ref.convlstm)):
        ops.get_impl("convlstm", "reference")
        ops._resolved[("convlstm", "reference")] = fn  # the dispatcher's cache: what the model's layers call
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig())
        step = EagerStep(net, torch.optim.Adam(net.parameters(), 1e-3), data, False)
        step(idx)  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step(idx)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events) / 1e3
        fills = sum(e.self_cpu_time_total for e in events if e.key == "aten::fill_") / 1e3
        rows.append(dict(step=name, step_self_cpu_ms=round(total, 1), fill_ms=round(fills, 1)))
        print(rows[-1], flush=True)
    ops._resolved[("convlstm", "reference")] = ref.convlstm
    return rows


def _cpu() -> str:
    m = machine()
    return f"{m['cpu']} ({m['cores']} cores)"


def _cells(r: dict) -> tuple:
    if "shape" in r:
        return tuple(r["shape"]), r["before_ms"], r["after_ms"], f"{r['speedup']:.2f}x", r["bit_equal"]
    return (f"training step, {r['step']} (profiled once)", f"self CPU {r['step_self_cpu_ms']} ms",
            f"of it aten::fill_ {r['fill_ms']} ms", "-", "-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", default="benchmarks/results/reference_unbind")
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    rows = []
    for B, T, C, n in ((32, 5, 32, 30), (32, 5, 64, 15)):
        x = torch.randn(B, T, C, n, n, generator=g).requires_grad_()
        w = (torch.randn(4 * C, 2 * C, 2, 2, generator=g) * 0.05).requires_grad_()
        b = torch.zeros(4 * C).requires_grad_()
        dout = torch.randn(B, T, C, n, n, generator=g)
        times, results = {"x[:, t]": [], "unbind": []}, {}
        for _ in range(args.repeats):
            for name, fn in (("x[:, t]", select_per_step), ("unbind", ref.convlstm)):
                t0 = time.perf_counter()
                y = fn(x, w, b, 1.0)
                grads = torch.autograd.grad(y, (x, w, b), dout)
                times[name].append(time.perf_counter() - t0)
                results[name] = (y, *grads)
        before, after = (1e3 * statistics.median(times[k]) for k in ("x[:, t]", "unbind"))
        equal = all(torch.equal(a, b_) for a, b_ in zip(results["x[:, t]"], results["unbind"]))
        rows.append(dict(shape=[B, T, C, n, n], before_ms=round(before, 1), after_ms=round(after, 1),
                         speedup=round(before / after, 3), bit_equal=equal))
        print(rows[-1], flush=True)
    rows += _step_profiles()
    sweep_report.table(
        args.out, "reference_unbind", "bench_reference_unbind.py",
        "The reference ConvLSTM's input slices on the CPU: x[:, t] against unbind",
        f"{torch.get_num_threads()} threads, float32; forward + backward of one level, median of "
        f"{args.repeats} alternating runs; outputs and the three gradients compared bit for bit.",
        ["x (B, T, C, H, W) / the training step", "x[:, t] (ms)", "unbind (ms)", "speed-up", "bit-equal"],
        rows, _cells,
        machine=f"{_cpu()}, torch {torch.__version__}, {machine()['date']}")


if __name__ == "__main__":
    main()
