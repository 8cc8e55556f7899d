"""Graphed training steps timed in alternation: the loop the A/B scripts share (graph_priority.py, bound_copies.py,
env_ab.py; graphed_step_ms.py times one step this way, bench_small_conv.py its kernels with ``median_ms``).

Each variant's step is built anew per round (``make(variant)``), warmed up with 5 steps, timed as the median of 5
runs of 40 steps (CUDA events, ms a step), then dropped before the next variant is built -- so at most one graph
is alive at a time, and every variant meets the same machine state in every round. A variant that fails is left out
of the later rounds where the caller asks for that (``alternate``'s ``failures``: env_ab.py, graph_priority.py).
"""
from __future__ import annotations

import collections
import gc
from pathlib import Path
from typing import Callable, Sequence

import torch

import bench_train as bt  # noqa: E402 (benchmarks/ is the script's own folder)
from mscred import train_graphs

BATCH = 128


def thesis_data():
    """(data, device): the thesis workload's windows (30 sensors) on CUDA, as bench_train.py builds them."""
    _, data, _ = bt.thesis_eager_step(BATCH)
    return data, data.segments.device


def graphed_step(data, device) -> train_graphs.GraphedStep:
    """The product's graphed fused bf16 training step at BATCH, from bench_train's seeded weights (warm-up, cuDNN
    autotuning and capture happen here)."""
    net, opt = bt.build("fused", 30, device, capturable=True)
    return train_graphs.GraphedStep(net, opt, data, BATCH, True)


def random_batches(n_windows: int, device, count: int = 8) -> list[torch.Tensor]:
    """``count`` fixed random batches of window indices (seed 1), on ``device``."""
    g = torch.Generator(device="cpu").manual_seed(1)
    return [torch.randperm(n_windows, generator=g)[:BATCH].to(device) for _ in range(count)]


def median_ms(fn: Callable[[], object], reps: int, rounds: int) -> float:
    """Median over ``rounds`` of the mean milliseconds of ``reps`` back-to-back calls of ``fn`` (CUDA events)."""
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return sorted(times)[rounds // 2]


def step_ms(step, batches: Sequence[torch.Tensor], steps: int = 40, runs: int = 5) -> tuple[float, float]:
    """(median ms a step over ``runs`` runs of ``steps`` steps, the last step's loss) after 5 warm-up steps."""
    for i in range(5):
        step(batches[i % len(batches)])
    torch.cuda.synchronize()
    state = {"i": 0, "loss": None}

    def one_step():
        state["loss"] = step(batches[state["i"] % len(batches)])
        state["i"] += 1
    ms = median_ms(one_step, steps, runs)
    return ms, float(state["loss"])


def alternate(make: Callable[[str, int], object], variants: Sequence[str], rounds: int,
              batches: Sequence[torch.Tensor], failures: dict[str, str] | None = None
              ) -> tuple[dict[str, list[float]], dict[str, float]]:
    """({variant: ms a step per round}, {variant: loss after its last timing}); ``make(variant, round)`` builds a
    step, printed as each timing ends. With a ``failures`` dict, a variant whose step raises while it is built or
    timed (an opt-in lever's kernel that does not compile on the device, say) is recorded there as its first error
    line and left out of the later rounds, so that one device call still times the others; a CUDA error that breaks
    the context still ends the run (at the synchronisation after it)."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    losses: dict[str, float] = {}
    for r in range(rounds):
        for v in variants:
            if failures is not None and v in failures:
                continue
            step = None
            try:
                step = make(v, r)
                ms, losses[v] = step_ms(step, batches)
            except Exception as err:
                if failures is None:
                    raise
                failures[v] = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"
                print(f"round {r} {v}: failed, {failures[v]}", flush=True)
            else:
                times[v].append(ms)
                print(f"round {r} {v}: {ms:.3f} ms, loss {losses[v]:.6f}", flush=True)
            del step
            gc.collect()
            torch.cuda.synchronize()
    return times, losses


def table(times: dict[str, list[float]], losses: dict[str, float],
          failures: dict[str, str] | None = None) -> list[str]:
    """The markdown table of ``alternate``'s result, a failed variant's row with its error (after the rounds it
    was timed in, if any)."""
    lines = ["| variant | ms a step, per round | loss after the timed steps |", "| --- | --- | --- |"]
    for v in list(times) + [v for v in (failures or {}) if v not in times]:
        ts = " / ".join(f"{t:.3f}" for t in times.get(v, []))
        if failures and v in failures:
            ts = f"{ts} (then failed: {failures[v]})" if ts else f"failed: {failures[v]}"
        loss = f"{losses[v]:.6f}" if v in losses else ""
        lines.append(f"| {v} | {ts} | {loss} |")
    return lines


def report(out_dir: str, filename: str, lines: list[str]) -> None:
    """Writes ``lines`` as out_dir/filename (the folder made if needed) and prints them."""
    text = "\n".join(lines) + "\n"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / filename).write_text(text)
    print(text)
