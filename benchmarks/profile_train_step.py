"""Where the fused bf16 training step's GPU time goes, kernel by kernel and op by op.

1. One whole training step (the Trainer's EagerStep, cuDNN autotuned as the graphed step is), 5 steps under
   torch.profiler: every CPU op with its input shapes and the GPU time of the kernels it launched
   (``ops_by_shape``), and one step's kernels in launch order, each with the op that launched it and that op's
   input shapes (``kernel_sequence``): what each convolution, copy and fill belongs to.
2. The graphed step (GraphedStep, the product's path): its replays' kernels, totals per step.
3. With ``--levels``: each ConvLSTM level alone at the training batch (128 windows of 5 steps, bf16, channels
   32/64/128/256 at 30/15/8/4 pixels, kernel 2): the kernels of its forward (saving the backward's state) and of
   its backward.

Kernel time per step is the profiler's GPU time of the kernels (``bench_train.is_annotation`` tells user
annotations from kernels); the graphed step's wall time is bench_train.py's.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/profile_train_step.py [--levels] [--out DIR]
Writes DIR/train_step_profile.txt.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

import bench_train as bt  # noqa: E402 (benchmarks/ is the script's own folder)
import sweep_report  # noqa: E402

BATCH = 128


def _profiled(fn, steps: int = 5, **options):
    """torch.profiler over ``steps`` calls of ``fn()`` after 3 unprofiled ones."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **options) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    return prof


def kernel_table(prof, steps: int, title: str, limit: int = 45) -> list[str]:
    """A title line with the totals, the time per kernel family (``bench_train.family_totals``), then per-kernel
    lines (us per step, calls per step)."""
    ks, attr = bt.kernel_events(prof.key_averages())
    ks.sort(key=lambda e: -getattr(e, attr))
    total = sum(getattr(e, attr) for e in ks) / steps
    lines = [f"## {title}: {sum(e.count for e in ks) / steps:g} kernels, {total / 1e3:.3f} ms of kernel time per "
             f"step", ""]
    families = bt.family_totals((e.key, getattr(e, attr) / steps) for e in ks)
    lines += [f"{us:9.1f} us  [{fam}]" for fam, us in families.items()] + [""]
    lines += [f"{getattr(e, attr) / steps:9.1f} us  x{e.count / steps:<5g} {e.key[:150]}" for e in ks[:limit]]
    return lines + [""]


def kernel_sequence(prof) -> list[str]:
    """One step's kernels in launch order with the innermost CPU op that launched each and its input shapes."""
    lines = ["## One eager step's kernels in launch order: us, kernel, launching op [input shapes]", ""]
    for e in prof.events():
        if e.device_type.name != "CPU" or not e.kernels:  # a kernel is attached to the one op that launched it
            continue
        shapes = str(e.input_shapes)[:120] if e.input_shapes else ""
        for k in e.kernels:
            lines.append(f"{k.duration:8.1f}  {k.name[:70]:70s}  {e.name} {shapes}")
    return lines + [""]


def training_step(text: list[str]) -> None:
    step, data, idx = bt.thesis_eager_step(BATCH)
    device = idx.device
    prof = _profiled(lambda: step(idx), record_shapes=True)
    text += kernel_table(prof, 5, "Eager fused bf16 step (cudnn.benchmark)")
    text += ["## Ops with input shapes, by the GPU time of their kernels (5 steps)", "",
             prof.key_averages(group_by_input_shape=True).table(
                 sort_by="self_device_time_total", row_limit=60, max_name_column_width=60,
                 max_shapes_column_width=110), ""]
    one = _profiled(lambda: step(idx), steps=1, record_shapes=True)
    text += kernel_sequence(one)
    del step
    torch.backends.cudnn.benchmark = False
    graphed, _ = bt.make_step("fused", 30, data, device, BATCH, True, True)
    text += kernel_table(_profiled(lambda: graphed(idx)), 5, "Graphed fused bf16 step (replays)")
    del graphed


def levels(text: list[str]) -> None:
    from bench_train_cells import LEVELS, level_inputs
    from mscred.ops.triton import convlstm as fused

    for ch, n in LEVELS:
        x, w, b, dout = level_inputs(ch, n)
        xp, w_x, w_h = fused.train_inputs(x, w)
        _, pre, cells, hprev = fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")
        text += kernel_table(_profiled(lambda: fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")), 5,
                             f"Level ({ch} channels, {n} x {n}) forward, saving the backward's state (per call)")
        text += kernel_table(_profiled(lambda: fused.convlstm_train_backward(dout, xp, w_x, w_h, b, pre, cells,
                                                                             hprev, 1.0, "nhwc")), 5,
                             f"Level ({ch} channels, {n} x {n}) backward (per call)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/train_step_profile")
    ap.add_argument("--levels", action="store_true", help="also each ConvLSTM level's forward and backward alone")
    args = ap.parse_args()
    text = [f"{sweep_report.machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/profile_train_step.py"
            f"{' --levels' if args.levels else ''}`.", ""]
    training_step(text)
    if args.levels:
        levels(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_step_profile.txt").write_text("\n".join(text) + "\n")
    print("\n".join(line for line in text if line.startswith("## ")))


if __name__ == "__main__":
    main()
