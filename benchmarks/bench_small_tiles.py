"""Forward tiles of the bias + SELU kernel and of the small-channel convolution, on the calls the model makes.

The model's own calls are recorded -- ``forward_windows`` of the thesis workload's scoring call (3,591 windows of
30 sensors, bf16 autocast, fused backend) and one training forward at batch 128 -- with their tensors, then each
call is replayed alone with every forward tile: ``bias_act.FWD_BLOCK`` (elements per program) x ``FWD_WARPS`` and
``small_conv.FWD_BLOCK_P`` (output pixels per program) x ``FWD_WARPS``. CUDA-event medians of 20 calls after 5
warm-ups, against the first tile of each kernel (the defaults before this sweep: 2048 x 4 and 128 x 4); each output
compared with that tile's, which it must equal: a tile does not change the arithmetic of these kernels.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_small_tiles.py [--out DIR]
Writes DIR/small_tiles.md and DIR/small_tiles.json.
"""
from __future__ import annotations

import argparse
import functools
import itertools

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv_layers import median_event_ms  # noqa: E402

WINDOWS, STEPS, SENSORS, BATCH = 3591, 5, 30, 128
BIAS_ACT_TILES = ((2048, 4), *((b, w) for b, w in itertools.product((1024, 2048, 4096, 8192), (4, 8))
                               if (b, w) != (2048, 4)))
SMALL_CONV_TILES = ((128, 4), *((b, w) for b, w in itertools.product((64, 128, 256), (4, 8)) if (b, w) != (128, 4)))


def record_calls():
    """[(kind, phase, function, args)] of every bias_act / small_conv forward launch of a scoring call and of a
    training forward."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet
    from mscred.ops.triton import bias_act, small_conv

    calls = []
    real_bias, real_conv = bias_act._forward_into, small_conv._forward
    phase = ["scoring"]

    def rec_bias(*args, **kwargs):
        calls.append(("bias_act", phase[0], functools.partial(real_bias, **kwargs), args))
        return real_bias(*args, **kwargs)

    def rec_conv(*args):
        calls.append(("small_conv", phase[0], real_conv, args))
        return real_conv(*args)
    bias_act._forward_into, small_conv._forward = rec_bias, rec_conv
    try:
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=SENSORS, backend="fused")).cuda()
        segments = torch.rand(WINDOWS + STEPS - 1, 3, SENSORS, SENSORS, device="cuda")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            net.eval().forward_windows(segments, STEPS)
        phase[0] = "training"
        windows = segments[:BATCH + STEPS - 1].unfold(0, STEPS, 1).permute(0, 4, 1, 2, 3)[:BATCH].contiguous()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            net.train()(windows)
    finally:
        bias_act._forward_into, small_conv._forward = real_bias, real_conv
    return calls


def _shape(kind: str, args) -> str:
    if kind == "bias_act":
        y, out = args[0], args[5]
        return f"y {tuple(y.shape)} -> out {tuple(out.shape)}" + (f", shuffle {args[6]}" if len(args) > 6 else "")
    x, w = args[0], args[1]
    return f"x {tuple(x.shape)}, w {tuple(w.shape)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/small_tiles")
    args = ap.parse_args()
    from mscred.ops.triton import bias_act, small_conv
    modules = {"bias_act": (bias_act, ("FWD_BLOCK", "FWD_WARPS"), BIAS_ACT_TILES),
               "small_conv": (small_conv, ("FWD_BLOCK_P", "FWD_WARPS"), SMALL_CONV_TILES)}
    defaults = {k: tuple(getattr(m, n) for n in names) for k, (m, names, _) in modules.items()}
    rows = []
    for i, (kind, phase, fn, call_args) in enumerate(record_calls()):
        module, names, tiles = modules[kind]
        ref = None
        for tile in tiles:
            for name, value in zip(names, tile):
                setattr(module, name, value)
            out = fn(*call_args).clone()
            ref = out if ref is None else ref
            rows.append(dict(call=i, kind=kind, phase=phase, shape=_shape(kind, call_args), tile=list(tile),
                             ms=median_event_ms(lambda: fn(*call_args), iters=20), same=bool(torch.equal(out, ref))))
            print(rows[-1], flush=True)
        for name, value in zip(names, defaults[kind]):
            setattr(module, name, value)
    meta = (f"{sweep_report.machine_line()}. Defaults: bias_act (FWD_BLOCK, FWD_WARPS) "
            f"{defaults['bias_act']}, small_conv (FWD_BLOCK_P, FWD_WARPS) {defaults['small_conv']}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_small_tiles.py`.")
    lines = ["# bias_act / small_conv forward tiles on the model's own calls", "", meta, "",
             "| call | kernel | phase | shapes | tile | ms | vs first tile | same output |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["call"] == r["call"])
        lines.append(f"| {r['call']} | {r['kind']} | {r['phase']} | {r['shape']} | {tuple(r['tile'])} | "
                     f"{r['ms']:.4f} | {base / r['ms']:.2f}x | {r['same']} |")
    totals = {}
    for r in rows:
        key = (r["phase"], tuple(r["tile"]), r["kind"])
        totals[key] = totals.get(key, 0.0) + r["ms"]
    lines += ["", "Sums over the calls of a phase (ms):", "", "| phase | kernel | tile | ms |",
              "| --- | --- | --- | --- |"]
    lines += [f"| {p} | {k} | {t} | {ms:.4f} |" for (p, t, k), ms in sorted(totals.items())]
    sweep_report.write(args.out, "small_tiles", meta, rows, lines)

if __name__ == "__main__":
    main()
