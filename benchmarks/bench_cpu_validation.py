"""The CPU Trainer's validation at the demo's settings, per-window forward (before commit 18295da) against
``forward_windows`` from the windows' shared segments: commit 18295da's "1.65x on validation" as a measurement.

Setting: ``mscred demo``'s data and model (``generate_synthetic`` with 30 sensors, 20,000 rows, seed 0; ``MSCRED``
defaults: reference backend, float32, batch 32) trained by ``MSCRED.fit`` for ``--epochs`` epoch(s) on the CPU; the
Trainer and its validation ``WindowDataset`` are taken from that fit (its ``_evaluate`` call), so the windows,
weights and batches are the fit's own. Each variant is timed as one whole ``Trainer._evaluate`` (every validation
window, a batch at a time), the inference object being:

- ``per-window``: ``EagerInference(net, val, bf16)``, the Trainer's line before 18295da (it still exists: the
  ``windows=False`` default): each batch gathered into (B, steps, K, n, n) and run through ``net(x)``;
- ``forward_windows, reference ops``: ``Trainer._make_inference(val)`` (today's code) with MSCRED_CPU_CHUNKED=0:
  ``forward_windows`` on the reference ops, as 18295da committed it (the chunked CPU path came later, 1b37dd3);
- ``forward_windows``: ``Trainer._make_inference(val)`` as it runs today (``ops/cpu_inference.py``'s chunked path).

Before timing, every variant's per-window losses are compared with the per-window path's (max abs difference, and
the validation loss). One untimed ``_evaluate`` each as warm-up, then ``--repeats`` rounds of the variants in turn;
medians of the wall time (each run in brackets) and of the process's CPU time; the machine's CPU wait (PSI) over
the timed runs says whether other jobs shared the cores meanwhile.

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_cpu_validation.py [--epochs 1] [--repeats 3]
        [--out benchmarks/results/cpu_validation]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from run_header import header, stalled, uptime, write_results

from mscred.data.synthetic import generate_synthetic
from mscred.detector import MSCRED
from mscred.train import Trainer
from mscred.train_graphs import EagerInference

VARIANTS = ("per-window", "forward_windows, reference ops", "forward_windows")


@contextmanager
def chunked(on: bool):
    """MSCRED_CPU_CHUNKED as the variant needs it (read at every call), restored after."""
    old = os.environ.get("MSCRED_CPU_CHUNKED")
    os.environ["MSCRED_CPU_CHUNKED"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["MSCRED_CPU_CHUNKED"]
        else:
            os.environ["MSCRED_CPU_CHUNKED"] = old


def fitted(epochs: int, seed: int):
    """(trainer, validation WindowDataset, history) of the demo's fit, caught at the Trainer's first validation."""
    caught = {}
    original = Trainer._evaluate

    def catch(self, infer, data):
        caught.setdefault("trainer", self)
        caught.setdefault("val", data)
        return original(self, infer, data)

    data = generate_synthetic(n_sensors=30, length=20_000, seed=seed)
    with mock.patch.object(Trainer, "_evaluate", catch):
        model = MSCRED(epochs=epochs, seed=seed, progress=False).fit(data.train)
    return caught["trainer"], caught["val"], model.history_


def inference(name: str, trainer, val):
    """The inference object of a variant, and whether the chunked CPU path is on for it."""
    if name == "per-window":
        return EagerInference(trainer.net, val, trainer.bf16), True   # the pre-18295da _make_inference line
    infer = trainer._make_inference(val)
    if not (isinstance(infer, EagerInference) and infer.windows):
        raise SystemExit(f"the Trainer's validation does not take forward_windows here: {infer!r}")
    return infer, name == "forward_windows"


def losses(trainer, infer, val) -> torch.Tensor:
    """Per-window validation losses, in _evaluate's batches."""
    batch = trainer.micro_batch or trainer.cfg.batch_size
    order = torch.arange(len(val))
    return torch.cat([infer(order[s:s + batch])[1] for s in range(0, len(val), batch)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1, help="training before validation is timed (the demo: 3)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="folder for results.md and results.json")
    args = parser.parse_args()

    lines = header("CPU validation at the demo's settings: per-window forward (before 18295da) and forward_windows",
                   {"torch": torch.__version__, "numpy": np.__version__,
                    "torch threads": str(torch.get_num_threads())})
    print("\n".join(lines), flush=True)
    t0 = time.perf_counter()
    trainer, val, history = fitted(args.epochs, args.seed)
    batch = trainer.micro_batch or trainer.cfg.batch_size
    setting = (f"{len(val)} validation windows of {val.steps} segments (30 sensors), batches of {batch}; "
               f"weights after {len(history)} epoch(s) of MSCRED.fit ({time.perf_counter() - t0:.0f} s), "
               f"val loss {history[-1]['val_loss']:.6f}")
    print(setting, flush=True)

    made = {name: inference(name, trainer, val) for name in VARIANTS}
    base = None
    checks = []
    for name, (infer, on) in made.items():
        with chunked(on):
            got = losses(trainer, infer, val)
        base = got if base is None else base
        checks.append(f"{name}: validation loss {got.mean().item():.8f}, per-window losses max |diff| "
                      f"{(got - base).abs().max().item():.2e} (largest loss {base.abs().max().item():.3g})")
        print(checks[-1], flush=True)

    def run(name: str) -> tuple[float, float, float]:
        """(wall, CPU, stalled) seconds: the process's CPU time (both torch threads), and the machine's CPU wait."""
        infer, on = made[name]
        with chunked(on):
            # (2 torch threads on 2 cores wait on each other at every op: one core taken by another job slowed
            # the per-window path up to 10x in runs here; the CPU wait says whether that happened)
            t, c, w = time.perf_counter(), time.process_time(), stalled()
            trainer._evaluate(infer, val)
            return time.perf_counter() - t, time.process_time() - c, stalled() - w

    for name in VARIANTS:   # warm-up: oneDNN's primitive set-up, the chunked path's buffers
        run(name)
    measured: dict[str, list[tuple[float, float, float]]] = {name: [] for name in VARIANTS}
    for r in range(args.repeats):
        for name in VARIANTS:
            measured[name].append(run(name))
        print(f"repeat {r + 1}: " + ", ".join(f"{n} {v[-1][0]:.3f} s (CPU {v[-1][1]:.3f} s, CPU wait "
                                              f"{v[-1][2]:.2f} s)" for n, v in measured.items()), flush=True)

    med = {name: statistics.median(w for w, _, _ in v) for name, v in measured.items()}
    cpu = {name: statistics.median(c for _, c, _ in v) for name, v in measured.items()}
    wait = sum(s for v in measured.values() for _, _, s in v)
    table = ["| validation through | wall s (runs) | windows/s | speed-up over per-window | CPU s | CPU speed-up |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name in VARIANTS:
        table.append(f"| {name} | {med[name]:.3f} ({', '.join(f'{w:.3f}' for w, _, _ in measured[name])}) | "
                     f"{len(val) / med[name]:.0f} | {med['per-window'] / med[name]:.2f}x | {cpu[name]:.3f} | "
                     f"{cpu['per-window'] / cpu[name]:.2f}x |")
    notes = [f"- setting: {setting}", *(f"- check, {c}" for c in checks),
             f"- one whole `Trainer._evaluate` per run; median of {args.repeats} rounds of the variants in turn "
             "(each run in brackets), after one warm-up each; wall seconds, and the process's CPU seconds",
             f"- CPU wait (/proc/pressure/cpu) over all timed runs: {wait:.2f} s (near 0: no other job took a core)",
             f"- uptime at end: `{uptime()}`"]
    write_results(args.out, lines, notes, table, {"args": {k: str(v) for k, v in vars(args).items()},
                                                  "setting": setting, "checks": checks, "runs": measured})


if __name__ == "__main__":
    main()
