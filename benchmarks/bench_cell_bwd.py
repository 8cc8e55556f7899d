"""The training backward of each ConvLSTM level: its kernels, and the backward cell kernel's variants.

For each level of the default model at the training batch (128 windows of 5 steps, bf16 operands, channels-last,
channels 32/64/128/256 at 30/15/8/4 pixels, kernel 2) the fused op's forward is run once with the state the
backward needs, then:

1. the level's backward (``convlstm_fused_backward``: cell kernels, recurrent data gradients, weight gradients,
   input convolution's gradients) is profiled kernel by kernel (torch.profiler, 5 calls);
2. the whole level backward is timed (CUDA-event medians) while only the backward cell kernel changes: the bias
   gradient as per-program partial sums (the default) or atomic adds (``MSCRED_LSTM_BIAS_PARTIALS=0``), elements
   per program (``BLOCK``) and warps (``NUM_WARPS_BWD``); the gradients are checked against the defaults' (equal
   for dx and the weight; the bias gradient within float32 summation-order rounding).

With ``--step`` it also profiles one whole fused bf16 training step (the Trainer's EagerStep, cuDNN autotuned as
the graphed step is) with the CPU op and input shapes behind every kernel, so that each convolution's time can be
put on its layer (``step_ops.txt``).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_cell_bwd.py [--step | --step-only] [--out DIR]
Writes DIR/cell_bwd.md, DIR/cell_bwd.json and with --step DIR/step_ops.txt.
"""
from __future__ import annotations

import argparse
import itertools
import os
from pathlib import Path

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv_layers import median_event_ms  # noqa: E402

LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
BATCH, STEPS, KERNEL = 128, 5, 2
BLOCKS = (1024, 2048)
WARPS = (4, 8)


def level_inputs(ch: int, n: int):
    """x (B, T, C, H, W) stored channels-last per step as the encoder hands it, weight, bias (float32 master, as
    under autocast), and an output gradient of the op's storage order."""
    g = torch.Generator(device="cuda").manual_seed(ch)
    bf = torch.bfloat16
    x = torch.randn(BATCH, STEPS, n, n, ch, device="cuda", dtype=bf, generator=g).permute(0, 1, 4, 2, 3)
    w = torch.randn(4 * ch, 2 * ch, KERNEL, KERNEL, device="cuda", dtype=bf, generator=g) / (2 * (2 * ch) ** 0.5)
    b = torch.randn(4 * ch, device="cuda", dtype=torch.float32, generator=g) * 0.5
    dout = torch.randn(BATCH, STEPS, n, n, ch, device="cuda", dtype=bf, generator=g).permute(0, 1, 4, 2, 3)
    return x, w, b, dout


def kernel_table(fn, calls: int = 5) -> list[tuple[str, float, float]]:
    """(kernel, calls per call of fn, us per call of fn), largest first."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = [(e.key, e.count / calls, e.device_time_total / calls) for e in prof.key_averages()
            if e.device_time_total > 0 and "#" not in e.key]
    return sorted(rows, key=lambda r: -r[2])


def _profiled(step, idx, **options):
    """torch.profiler over 5 calls of ``step(idx)`` after 3 unprofiled ones."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step(idx)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **options) as prof:
        for _ in range(5):
            step(idx)
        torch.cuda.synchronize()
    return prof


def _kernel_sum(prof) -> str:
    """"<kernels> kernels, <ms> ms of kernel time per step" of 5 profiled steps (GPU-side events only)."""
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and "#" not in e.key]
    return (f"{sum(e.count for e in events) / 5:g} kernels, {sum(e.self_device_time_total for e in events) / 5e3:.3f}"
            f" ms of kernel time per step")


def step_ops(path: Path) -> None:
    """One fused bf16 training step, eager (cuDNN autotuned, as the graphed step is, and with its heuristics) and
    graphed: kernel counts and times, the CPU ops with input shapes behind the kernels, and where (Python stack)
    the copies, fills and adds come from."""
    import bench_train as bt
    from mscred.signature import signature_matrices
    from mscred.train import WindowDataset

    device = torch.device("cuda")
    values = bt.thesis_series(36_000, 30)
    data = WindowDataset(torch.from_numpy(signature_matrices(values, windows=bt.WINDOWS, gap=bt.GAP)).to(device),
                         bt.STEPS)
    idx = torch.randperm(len(data), device=device)[:BATCH]
    text = [f"{sweep_report.machine_line()}. 5 profiled steps per section (divide the totals by 5).", ""]
    for autotune in (True, False):
        step, _ = bt.make_step("fused", 30, data, device, BATCH, False, True, cudnn_benchmark=autotune)
        prof = _profiled(step, idx, record_shapes=True, with_stack=True)
        text += [f"## Eager fused bf16 step, cudnn.benchmark={autotune}: {_kernel_sum(prof)}", ""]
        if autotune:
            text += [prof.key_averages(group_by_input_shape=True).table(
                sort_by="self_device_time_total", row_limit=60, max_name_column_width=60,
                max_shapes_column_width=110), ""]
        stacks = [e for e in prof.key_averages(group_by_stack_n=8)
                  if e.key in ("aten::copy_", "aten::fill_", "aten::add", "aten::add_", "aten::sum", "aten::zero_",
                               "aten::clone", "aten::contiguous") and e.self_device_time_total > 0]
        stacks.sort(key=lambda e: -e.self_device_time_total)
        text += ["### copies, fills, adds, sums by Python stack (us of kernels per step, calls per step)", ""]
        for e in stacks[:25]:
            frames = " <- ".join(f for f in e.stack if "mscred" in f or "bench" in f)[:600]
            text.append(f"{e.self_device_time_total / 5:8.1f} us x{e.count / 5:g} {e.key}: {frames}")
        text.append("")
        del step
    torch.backends.cudnn.benchmark = False
    for autotune in (True, False):
        step, _ = bt.make_step("fused", 30, data, device, BATCH, True, True, cudnn_benchmark=autotune)
        prof = _profiled(step, idx)
        text += [f"## Graphed fused bf16 step (replays), GraphedStep cudnn_benchmark={autotune}: {_kernel_sum(prof)}",
                 "", prof.key_averages().table(sort_by="self_device_time_total", row_limit=40,
                                               max_name_column_width=110), ""]
        del step
        torch.cuda.synchronize()
    path.write_text("\n".join(text) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/cell_bwd")
    ap.add_argument("--step", action="store_true", help="also profile a whole training step's ops (step_ops.txt)")
    ap.add_argument("--step-only", action="store_true", help="only the training step's profiles")
    args = ap.parse_args()
    if args.step_only:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        step_ops(Path(args.out) / "step_ops.txt")
        return
    from mscred.ops.triton import convlstm as fused

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    defaults = (fused.BLOCK, fused.NUM_WARPS_BWD)
    rows, profiles = [], {}
    for ch, n in LEVELS:
        x, w, b, dout = level_inputs(ch, n)
        _, pre, cells, hprev = fused.convlstm_fused(x, w, b, 1.0, "nhwc", True)

        def backward():
            return fused.convlstm_fused_backward(dout, x, w, b, pre, cells, hprev, 1.0, "nhwc")

        def forward():
            return fused.convlstm_fused(x, w, b, 1.0, "nhwc", True)

        os.environ["MSCRED_LSTM_BIAS_PARTIALS"] = "1"
        ref = [t.float() for t in backward()]
        profiles[f"{ch}, {n}"] = kernel_table(backward)
        fwd_ms = median_event_ms(forward)
        for partials, block, warps in itertools.product(("1", "0"), BLOCKS, WARPS):
            os.environ["MSCRED_LSTM_BIAS_PARTIALS"] = partials
            fused.BLOCK, fused.NUM_WARPS_BWD = block, warps
            got = [t.float() for t in backward()]
            same = torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
            db_err = ((got[2] - ref[2]).norm() / ref[2].norm()).item()
            ms = median_event_ms(backward)
            row = dict(channels=ch, size=n, partials=partials == "1", block=block, warps=warps, backward_ms=ms,
                       forward_ms=fwd_ms, same_dx_dw=same, dbias_rel_diff=db_err)
            rows.append(row)
            print(row, flush=True)
        fused.BLOCK, fused.NUM_WARPS_BWD = defaults
        os.environ.pop("MSCRED_LSTM_BIAS_PARTIALS")
    meta = (f"{sweep_report.machine_line()}. Batch {BATCH}, {STEPS} steps, bf16, kernel {KERNEL}. Defaults: BLOCK "
            f"{defaults[0]}, NUM_WARPS_BWD {defaults[1]}, partial sums. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_cell_bwd.py`.")
    lines = ["# The training backward of each ConvLSTM level (batch 128, bf16): cell kernel variants", "", meta, "",
             "| level (channels, size) | bias gradient | BLOCK | warps | backward ms | vs defaults | forward ms "
             "| dx, dW equal | dbias rel. diff |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["backward_ms"] for q in rows if q["channels"] == r["channels"] and q["partials"]
                    and (q["block"], q["warps"]) == defaults)
        lines.append(f"| {r['channels']}, {r['size']} | {'partials' if r['partials'] else 'atomics'} | {r['block']} "
                     f"| {r['warps']} | {r['backward_ms']:.3f} | {base / r['backward_ms']:.2f}x | "
                     f"{r['forward_ms']:.3f} | {r['same_dx_dw']} | {r['dbias_rel_diff']:.1e} |")
    for level, table in profiles.items():
        lines += ["", f"## Level ({level}): the backward's kernels (defaults; us per call of the level backward)", "",
                  "| us | calls | kernel |", "| --- | --- | --- |"]
        lines += [f"| {us:.1f} | {c:g} | `{k[:100]}` |" for k, c, us in table]
    sweep_report.write(args.out, "cell_bwd", meta, rows, lines)
    if args.step:
        step_ops(out / "step_ops.txt")


if __name__ == "__main__":
    main()
