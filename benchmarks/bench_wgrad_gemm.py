"""The ConvLSTM weight gradients as plain GEMMs over shifted rows, against cuDNN's weight-gradient kernels.

The training step's ConvLSTM weight gradients (8 cuDNN calls, 306 us + 24 us of workspace initialisation in
results/transpose_taps/profile/) run at 52-84% of the measured bf16 matrix rate by our arithmetic on that profile
(their FLOPs over their times, docs/training-kernel-plan.md, "The gap by kernel group"), the largest gap to a floor
there. This measures whether cuBLAS does better
before anything is built on it.

The identity: a 2 x 2 stride-1 convolution reads its zero-bordered input X (N, C, H+1, W+1) at output pixel (y, x)
from rows (y+dy, x+dx). Flatten X channels-last to Xf (Q, C), Q = N (H+1) (W+1), and give the output gradient the
same bordered geometry, dY' (N, O, H+1, W+1) with a zero last row and column, flattened to dYf (Q, O). Then for each
tap, with s = dy (W+1) + dx,

    dW[:, :, dy, dx] = dYf[0 : Q-s]^T @ Xf[s : Q]

(a valid output pixel's shifted row stays inside its image; every row that meets another image's pixels, and every
row cut off at the end, is a zero row of dY'). Four GEMMs of (O x Q) @ (Q x C), no im2col. The product would need
the cell kernel's backward to write the gate gradients into a bordered buffer; the "from a plain dY" rows add the
padded copy that costs otherwise.

Rows per call of the step (bf16, channels-last, the shapes of the default model at batch 128 x 5 steps): cuDNN
(``convolution_backward``, cudnn.benchmark as in training), the four GEMMs from a bordered dY', and the same with
the padded copy of dY first; each captured in a CUDA graph and replayed (CUDA-event median of 20 after 5 warm-ups),
its result compared with cuDNN's first.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_wgrad_gemm.py [--out DIR]
          (any machine): python3 benchmarks/bench_wgrad_gemm.py --check   (the identity in float64, small sizes)
Writes DIR/wgrad_gemm.md and DIR/wgrad_gemm.json.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

CONV = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)  # stride, padding, dilation, transposed, output padding, groups
# (name, images, gate channels O, input channels C, output map side n): the step's weight-gradient calls
CALLS = [("level 1, [x, h] concatenated", 640, 128, 64, 30), ("level 2, [x, h] concatenated", 640, 256, 128, 15),
         ("level 3, input", 640, 512, 128, 8), ("level 3, recurrent", 512, 512, 128, 8),
         ("level 4, input", 640, 1024, 256, 4), ("level 4, recurrent", 512, 1024, 256, 4)]


def bordered_grad(dy: torch.Tensor) -> torch.Tensor:
    """dY (N, O, H, W) -> dY' (N, O, H+1, W+1): the same values, a zero last row and column, channels-last."""
    n, o, h, w = dy.shape
    out = torch.zeros(n, h + 1, w + 1, o, device=dy.device, dtype=dy.dtype).permute(0, 3, 1, 2)  # channels-last
    out[:, :, :h, :w] = dy
    return out


def shifted_gemm_wgrad(dyb: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The weight gradient (O, C, 2, 2) of a 2 x 2 stride-1 convolution of the bordered x (N, C, H+1, W+1), from
    its bordered output gradient dyb (N, O, H+1, W+1) (``bordered_grad``); both channels-last."""
    n, o, hp, wp = dyb.shape
    c, q = x.shape[1], n * hp * wp
    dyf = dyb.permute(0, 2, 3, 1).reshape(q, o)  # views: channels-last storage is (pixels, channels)
    xf = x.permute(0, 2, 3, 1).reshape(q, c)
    taps = torch.empty(2, 2, o, c, device=x.device, dtype=x.dtype)
    for dy in range(2):
        for dx in range(2):
            s = dy * wp + dx
            torch.mm(dyf[:q - s].t(), xf[s:], out=taps[dy, dx])
    return taps.permute(2, 3, 0, 1)  # (O, C, 2, 2)


def check(seed: int = 0) -> float:
    """The identity against autograd of F.conv2d in float64 on this machine, at awkward sizes (non-square maps,
    channel counts that are not powers of two); returns the largest relative difference (asserted < 1e-12)."""
    g = torch.Generator().manual_seed(seed)
    worst = 0.0
    for n, c, o, h, w in ((1, 1, 1, 1, 1), (3, 5, 7, 6, 4), (2, 3, 8, 5, 9), (4, 16, 12, 7, 7)):
        x = torch.zeros(n, c, h + 1, w + 1, dtype=torch.float64)
        x[:, :, :h, :w] = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)  # TF's bottom/right border
        weight = torch.randn(o, c, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
        dy = torch.randn(n, o, h, w, generator=g, dtype=torch.float64)
        F.conv2d(x, weight).backward(dy)
        got = shifted_gemm_wgrad(bordered_grad(dy), x.contiguous(memory_format=torch.channels_last))
        diff = ((got - weight.grad).abs().max() / weight.grad.abs().max()).item()
        assert diff < 1e-12, (n, c, o, h, w, diff)
        worst = max(worst, diff)
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/wgrad_gemm")
    ap.add_argument("--check", action="store_true", help="only the float64 identity check (no GPU needed)")
    args = ap.parse_args()
    print(f"identity check (float64, CPU): largest relative difference {check():.1e}", flush=True)
    if args.check:
        return
    import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
    from bench_bwd_tiles import _graphed, _rel_diff  # noqa: E402
    from bench_conv_layers import median_event_ms  # noqa: E402

    torch.backends.cudnn.benchmark = True  # as the training step's warm-up
    cl, bf = torch.channels_last, torch.bfloat16
    rows = []
    for name, images, o, c, n in CALLS:
        g = torch.Generator(device="cuda").manual_seed(o + c)
        x = torch.zeros(images, n + 1, n + 1, c, device="cuda", dtype=bf).permute(0, 3, 1, 2)  # channels-last
        x[:, :, :n, :n] = torch.randn(images, c, n, n, device="cuda", generator=g).to(bf)
        dy = (torch.randn(images, o, n, n, device="cuda", generator=g) * 0.01).to(bf).contiguous(memory_format=cl)
        dyb = bordered_grad(dy)
        weight = torch.empty(o, c, 2, 2, device="cuda", dtype=bf, memory_format=cl)

        def cudnn():
            return torch.ops.aten.convolution_backward(dy, x, weight, None, *CONV, [False, True, False])[1]

        def gemm():
            return shifted_gemm_wgrad(dyb, x)

        def gemm_from_plain():
            return shifted_gemm_wgrad(bordered_grad(dy), x)

        want = cudnn()
        flops = 2.0 * o * c * 4 * images * n * n
        for variant, fn in (("cuDNN", cudnn), ("4 GEMMs, bordered dY", gemm),
                            ("4 GEMMs + bordering dY", gemm_from_plain)):
            diff = 0.0 if fn is cudnn else _rel_diff([fn()], [want])
            ms = median_event_ms(_graphed(fn, ()).replay, iters=20)
            rows.append(dict(call=name, variant=variant, ms=ms, tflops=flops / ms / 1e9, rel_diff=diff))
            print(rows[-1], flush=True)
        del x, dy, dyb
    meta = (f"{sweep_report.machine_line()}. Each weight-gradient call of the training step (batch 128 x 5 steps, "
            "bf16, channels-last, 2 x 2 kernel), cuDNN against four cuBLAS GEMMs over shifted rows. Command: "
            "`PYTHONPATH=src python3 benchmarks/bench_wgrad_gemm.py`.")
    lines = ["# ConvLSTM weight gradients: cuDNN against GEMMs over shifted rows (H200, bf16)", "", meta, "",
             "| call | variant | ms | TFLOP/s | vs cuDNN | largest difference from cuDNN (relative) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["call"] == r["call"] and q["variant"] == "cuDNN")
        lines.append(f"| {r['call']} | {r['variant']} | {r['ms']:.4f} | {r['tflops']:.0f} | {base / r['ms']:.2f}x | "
                     f"{r['rel_diff']:.1e} |")
    sweep_report.write(args.out, "wgrad_gemm", meta, rows, lines)


if __name__ == "__main__":
    main()
