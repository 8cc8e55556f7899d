"""What one replay of the graphed training step costs the host, and how long one step takes from an idle GPU, with
an environment switch's settings in alternation (built for MSCRED_GRAPH_MEMSET_KERNELS: the step's time line showed
~150 us between the eager window gather and the graph's first kernel with the memsets replaced, 3 us without,
results/graph_memsets/timeline/).

Per setting and round: the step built anew (step_alternation.graphed_step), then
- host us a replay: ``cuda_graph.replay()`` timed on the CPU (perf_counter) with the GPU idle before each (median
  of 30);
- idle-GPU step us: CUDA events around the gather and the replay, from an idle GPU (median of 30);
- back-to-back ms a step: step_alternation.step_ms (as env_ab.py).
Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/graph_launch_cost.py --var V --values 0,1 [--rounds 2]
    [--out DIR]
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import torch

import step_alternation  # noqa: E402
import sweep_report  # noqa: E402


def host_and_idle_us(step, idx: torch.Tensor, reps: int = 30) -> tuple[float, float]:
    """(median host us of cuda_graph.replay(), median GPU us of gather + replay from an idle GPU)."""
    host, gpu = [], []
    replay = step.graph  # _GatherThenReplay: the gather, then the CUDA graph
    step.static_idx.copy_(idx)
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay.gather()
        t0 = time.perf_counter()
        replay.cuda_graph.replay()
        host.append((time.perf_counter() - t0) * 1e6)
        end.record()
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(end) * 1e3)
    return statistics.median(host), statistics.median(gpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--var", required=True)
    ap.add_argument("--values", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/graph_launch_cost")
    args = ap.parse_args()
    data, device = step_alternation.thesis_data()
    batches = step_alternation.random_batches(len(data), device)
    rows = []
    for r in range(args.rounds):
        for value in args.values.split(","):
            os.environ[args.var] = value
            step = step_alternation.graphed_step(data, device)
            host, idle = host_and_idle_us(step, batches[0])
            ms, _ = step_alternation.step_ms(step, batches)
            rows.append(f"| {r} | {args.var}={value!r} | {host:.1f} | {idle:.1f} | {ms:.3f} |")
            print(rows[-1], flush=True)
            del step
            gc.collect()
            torch.cuda.synchronize()
    lines = [f"# One replay's host cost and idle-GPU latency, {args.var} = {args.values} (graph_launch_cost.py)", "",
             f"{sweep_report.machine_line()}.", "",
             "| round | setting | host us a replay() | idle-GPU step us (gather + replay) | back-to-back ms a step |",
             "| --- | --- | --- | --- | --- |", *rows]
    step_alternation.report(args.out, "graph_launch_cost.md", lines)


if __name__ == "__main__":
    main()
