"""The training cell kernels per ConvLSTM level: their activations, the backward's bytes, and their grid.

``--set activations`` (2026-12-02, results/cell_math/, results/cell_bytes/): the backward cell kernel compiled for
sm_90 runs ~160 instructions per hidden element and step (~640 per loop iteration of 4 elements at level 1, SASS
from Triton's compiler on the CPU machine; benchmarks/cell_kernel_sass.py counts them for every level); its five
sigmoids and tanhs, each an exp and a division with their range checks, are ~60 of them. With ``FAST_ACT`` (bf16 /
fp16 gates, the default on CUDA; MSCRED_LSTM_FAST_ACT=0 turns it off) each is one MUFU.TANH (PTX tanh.approx.f32,
relative error ~2^-11) and the loop is ~436 instructions.
Rows: the exact forms (the code before 2026-12-02), the SFU, and two byte savings of the backward on top
(``convlstm.cell_backward_options``): c_t recomputed from the pre-activations and c_{t-1} instead of read back
(MSCRED_LSTM_RECOMPUTE_C, default on), and the running dc stored in bf16 (MSCRED_LSTM_BF16_DC=1, opt-in).

``--set waves``: the backward cell kernel's grid as one wave of grid-stride programs (``convlstm.wave_grid``,
MSCRED_CELL_WAVE="N" programs per SM) against TILES tiles per program. By the
registers of the sm_90 code (benchmarks/cell_kernel_sass.py: at level 1 56 a thread for the forward, 79 for the
backward, at 4 warps: 9 and 6 blocks per SM), level 1's forward launches 3.03 waves and its backward 2.27, level 2's
forward 1.52: a last, partly empty wave each. Its first run (2026-12-02, results/cell_waves/: default grids, 9/6,
9/9, 18/12, 4/3) found the backward faster at 6 per SM and the forward slower at every count, so the backward's
one wave became the default (``WAVE_PER_SM``), and the forward's grid-stride path was removed (2026-12-02; the
earlier "F/B" form of the setting is still read when F is 0). Rows since: TILES tiles a program (0, the grids
before), the default (6 per SM), the backward at 4 and 8 per SM.

Per level of the default model at the training batch (128 windows of 5 steps, bf16, channels-last, kernel 2; levels
1-2 take the concatenated-gates path as in training), for each variant:
- the level's forward and backward, each captured in a CUDA graph and replayed (median of 30, ``bench_train_cells``),
- the cell kernels' own time per call (torch.profiler over 5 eager calls of each direction),
- the error of h and of every gradient (dx, dW_x, dW_h, dbias) against the same op run in float64 on the same inputs
  (relative norm of the difference).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_cell_math.py [--set activations|waves] [--out DIR]
       (any machine):  TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/bench_cell_math.py --dry [--set ...]
                       (small sizes on the CPU; the interpreter runs the exact forms only)
Writes DIR/cell_<set>.md and DIR/cell_<set>.json (DIR: benchmarks/results/cell_<set>).
"""
from __future__ import annotations

import argparse
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms, level_inputs  # noqa: E402

# (label, environment) per set; each level's first row is the one the others are compared with
VARIANT_SETS = {
    "activations": (("exact", {"MSCRED_LSTM_FAST_ACT": "0", "MSCRED_LSTM_RECOMPUTE_C": "0"}),
                    ("SFU tanh", {"MSCRED_LSTM_RECOMPUTE_C": "0"}),
                    ("SFU tanh, c recomputed", {}),
                    ("SFU tanh, c recomputed, bf16 dc", {"MSCRED_LSTM_BF16_DC": "1"})),
    "waves": (("TILES tiles a program (0)", {"MSCRED_CELL_WAVE": "0"}),
              ("default (backward one wave, 6 per SM)", {})) + tuple(
        (f"grid-stride, {w} per SM", {"MSCRED_CELL_WAVE": w}) for w in ("4", "8")),
}
SETTINGS = ("MSCRED_LSTM_FAST_ACT", "MSCRED_LSTM_RECOMPUTE_C", "MSCRED_LSTM_BF16_DC", "MSCRED_CELL_WAVE")
KERNELS = ("cell_fwd_kernel", "cell_bwd_kernel")


def run_level(fused, x, w, b, dout):
    """(h, (dx, dw_x, dw_h, db), forward, backward): one training call of the level and closures repeating it."""
    xp, w_x, w_h = fused.train_inputs(x, w)

    def forward():
        return fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")

    state = forward()

    def backward():
        return fused.convlstm_train_backward(dout, xp, w_x, w_h, b, *state[1:], 1.0, "nhwc")

    return state[0], backward(), forward, backward


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    return ((got.double() - ref).norm() / ref.norm()).item()


def kernel_us(forward, backward, calls: int = 5) -> dict[str, float]:
    """Mean GPU time (us) per launch of each cell kernel over ``calls`` eager calls of each direction."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            forward()
            backward()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if e.key in KERNELS:
            total = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
            out[e.key] = total / e.count
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="activations", choices=sorted(VARIANT_SETS))
    ap.add_argument("--out", default=None, help="default benchmarks/results/cell_<set>")
    ap.add_argument("--dry", action="store_true", help="CPU interpreter, small sizes: checks the script runs")
    args = ap.parse_args()
    variants = VARIANT_SETS[args.set]
    from mscred.ops.triton import convlstm as fused

    device = "cpu" if args.dry else "cuda"
    levels = ((32, 6), (64, 3)) if args.dry else ((32, 30), (64, 15), (128, 8), (256, 4))
    batch, steps = (3, 5) if args.dry else (128, 5)
    rows = []
    for ch, n in levels:
        x, w, b, dout = level_inputs(ch, n, batch, steps, device)
        h64, g64, _, _ = run_level(fused, x.double(), w.double(), b.double(), dout.double())
        for label, env in variants:
            for name in SETTINGS:
                os.environ.pop(name, None)
            os.environ.update(env)
            h, grads, forward, backward = run_level(fused, x, w, b, dout)
            errors = {"h": rel_error(h, h64)}
            errors.update({name: rel_error(g, r) for name, g, r in zip(("dx", "dw_x", "dw_h", "db"), grads, g64)})
            row = dict(channels=ch, size=n, variant=label, fast=fused.fast_activations(x.dtype), errors=errors)
            if not args.dry:
                row.update(forward_ms=graph_ms(forward), backward_ms=graph_ms(backward),
                           kernel_us=kernel_us(forward, backward))
            rows.append(row)
            print(row, flush=True)
    for name in SETTINGS:
        os.environ.pop(name, None)
    machine = "CPU interpreter (dry run)" if args.dry else sweep_report.machine_line()
    meta = (f"{machine}. Batch {batch}, {steps} steps, bf16, kernel 2, CUDA-graph replays; "
            "errors against the same op in float64. "
            f"Command: `PYTHONPATH=src python3 benchmarks/bench_cell_math.py --set {args.set}`.")
    lines = [f"# The training cell kernels per level: {args.set}", "", meta, "",
             "| level (channels, size) | variant | forward ms | backward ms | cell fwd us | cell bwd us | "
             f"fwd + bwd vs {variants[0][0]} | error h | dx | dW_x | dW_h | dbias |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    wanted = {label: label != "exact" for label, _ in variants}  # a row whose activations did not run says so
    for r in rows:
        base = next(q for q in rows if q["channels"] == r["channels"] and q["variant"] == variants[0][0])
        k, e = r.get("kernel_us", {}), r["errors"]
        both = r.get("forward_ms", 0.0) + r.get("backward_ms", 0.0)
        ratio = (base.get("forward_ms", 0.0) + base.get("backward_ms", 0.0)) / both if both else float("nan")
        lines.append(
            f"| {r['channels']}, {r['size']} | {r['variant']}"
            f"{' (exact activations ran)' if wanted[r['variant']] != r['fast'] else ''} | "
            f"{r.get('forward_ms', float('nan')):.3f} | {r.get('backward_ms', float('nan')):.3f} | "
            f"{k.get(KERNELS[0], float('nan')):.1f} | {k.get(KERNELS[1], float('nan')):.1f} | {ratio:.2f}x | "
            + " | ".join(f"{e[name]:.1e}" for name in ("h", "dx", "dw_x", "dw_h", "db")) + " |")
    sweep_report.write(args.out or f"benchmarks/results/cell_{args.set}", f"cell_{args.set}", meta, rows, lines)


if __name__ == "__main__":
    main()
