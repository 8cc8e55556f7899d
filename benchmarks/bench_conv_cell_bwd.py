"""Level 1's training backward on the concatenated path: the split path (per step the Triton cell backward, cuDNN's
transposed convolution and the dx copy) against the backward step kernel (``ops/conv_cell/conv_cell_bwd.cu``,
the default; MSCRED_LSTM_CONV_CELL_BWD=0 the split path), as CUDA-graph replays. MSCRED_CONV_CELL_FLAGS
chooses the kernels' build (A/B builds: -DMSCRED_CONV_CELL_PRE_WITH_BIAS=1).

The call is ``convlstm_concat.backward`` as the training step makes it (batch 128, 5 steps, C = Ch = 32, 30 x 30,
bf16, float16 cells, float32 dc and bias gradient, the forward's gates from the forward kernel; the weight gradient
call included, the same in both). Outputs (the input gradient, both weight gradients, the bias gradient) compared
with the split path's: largest difference relative to the largest magnitude. With the kernels of one eager call.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_conv_cell_bwd.py [--out DIR] [--variants
'label=-D flags;...'] (A/B builds after the default kernel, one process: each build's forward stores the gates the
backward then reads). Writes DIR/conv_cell_bwd.md and .json (DIR: benchmarks/results/conv_cell_bwd).
"""
from __future__ import annotations

import argparse
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv_cell import B, PADS, T, _inputs, _kernel_times  # noqa: E402
from bench_train_cells import graph_ms  # noqa: E402

C, N = 32, 30


def main() -> None:
    from mscred.ops import conv_cell
    from mscred.ops.triton import convlstm_concat
    from mscred.ops.triton.runtime import tl

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/conv_cell_bwd")
    ap.add_argument("--variants", default="",
                    help="A/B builds timed after the default kernel: 'label=-D flags' separated by ';' "
                         "(MSCRED_CONV_CELL_FLAGS; 'label=' the default build again)")
    args = ap.parse_args()
    variants = [tuple(v.split("=", 1)) for v in args.variants.split(";") if v.strip()]
    images, w_x, w_h, bias = _inputs(C, N)
    out, cells, xh = convlstm_concat.buffers(B, T, C, C, N, N, PADS, images, torch.float16)
    g = torch.Generator(device="cuda").manual_seed(2)
    # dL/dh in the output's layout, (B, T, Ch, H, W) stored (B, T, H, W, Ch)
    dout = torch.randn(B, T, N, N, C, device="cuda", generator=g).to(torch.bfloat16).permute(0, 1, 4, 2, 3)
    state = {}

    def backward():
        return convlstm_concat.backward(dout, w_x, w_h, bias, state["gates"], cells, xh, PADS, 1.0, tl.float32,
                                        torch.float32, True, torch.float32)

    rows, ref = [], None
    found = {name: os.environ.get(name) for name in ("MSCRED_CONV_CELL_FLAGS", "MSCRED_LSTM_CONV_CELL_BWD")}
    for setting, flags in [("split", ""), ("kernel", "")] + [(f"kernel {label}", f) for label, f in variants]:
        os.environ["MSCRED_LSTM_CONV_CELL_BWD"] = "0" if setting == "split" else "1"
        os.environ["MSCRED_CONV_CELL_FLAGS"] = flags
        # the gates as this build's forward stores them (with the bias or without)
        state["gates"] = convlstm_concat.forward(images, w_x, w_h, bias, out, cells, xh, PADS, 1.0, tl.float32)
        ran = setting == "split" or conv_cell.runs_backward_on_check_level(xh, dout)
        got = [t.clone() for t in backward()]
        torch.cuda.synchronize()
        ref = ref or got
        diff = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(got, ref))
        ms = graph_ms(backward)
        first = rows[0]["ms"] if rows else ms
        rows.append(dict(setting=setting if ran else f"{setting} (did not run)", flags=flags, ms=round(ms, 4),
                         vs_split=round(first / ms, 3), rel_diff=float(f"{diff:.2e}"),
                         kernels=_kernel_times(backward)))
        print(rows[-1], flush=True)
    for name, value in found.items():  # (as this run found them)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    sweep_report.table(
        args.out, "conv_cell_bwd", "bench_conv_cell_bwd.py",
        "Level 1's training backward: the split path against the backward step kernel",
        f"convlstm_concat.backward at batch {B}, {T} steps, C = Ch = {C}, {N} x {N}, bf16, float16 cells; one CUDA "
        "graph of the whole call (the weight gradient included), median of 30 replays. Difference: largest over the "
        "input, weight and bias gradients, relative to the split path's largest magnitude.",
        ["setting", "build flags", "ms", "vs split", "largest difference (relative)", "kernels of one eager call"],
        rows, lambda r: (r["setting"], r["flags"] or "default", r["ms"], f"{r['vs_split']:.2f}x",
                         f"{r['rel_diff']:.1e}", r["kernels"]))


if __name__ == "__main__":
    main()
