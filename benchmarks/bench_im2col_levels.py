"""Levels 3-4's ConvLSTM convolutions as cuBLAS GEMMs on an im2col of their input, against cuDNN, per call.

Why: profiled alone at the training batch (results/step_profile_1202/, per-level tables), levels 3 and 4 spend 0.64
of their 0.81 ms in cuDNN (39 us of it the weight gradients' workspace initialisations): the recurrent convolution of
each step (4.3 GFLOP a call, ~16.5 us: ~260 TFLOP/s,
a third of the measured bf16 matrix rate), its data gradient (~22-29 us a call with the input's), and the weight
gradients. At 8 x 8 and 4 x 4 pixels a call is a GEMM of only 8,192 / 2,048 rows, where cuDNN's implicit-GEMM
kernels run one short wave. The question before anything is built: does cuBLAS run the same arithmetic faster as a
plain GEMM over the im2col matrix -- which the cell kernel could write beside h_t at no extra pass (each h value to
its four tap columns) -- and could the data gradient's four tap sums move into the backward cell kernel's reads?

The identity (2 x 2 kernel, TF "same": the input zero-bordered at the bottom and right, stride 1): with
col[(b, y, x), (dy, dx, c)] = X[b, c, y + dy, x + dx] and Wm[(dy, dx, c), o] = W[o, c, dy, dx],
    conv(X, W)        = col @ Wm                   (channels-last rows: the gates as the cell kernel reads them)
    d col             = dY @ Wm^T                  (d X = the four tap blocks of d col added back at their shifts)
    d W               = col^T @ dY                 (one GEMM over all steps' rows)
Each row (bf16, batch 128, channels-last, cudnn.benchmark as in training): cuDNN's call and the GEMM, each captured
in a CUDA graph and replayed (CUDA-event median of 30, ``bench_train_cells.graph_ms``), the im2col gather (torch's
copy of the four shifted views) timed apart; the GEMM's result against cuDNN's (relative norm of the difference;
for the data gradient after the tap sums, done in PyTorch for the check only).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_im2col_levels.py [--out DIR]
          (any machine): python3 benchmarks/bench_im2col_levels.py --check   (the identities in float64, small)
Writes DIR/im2col_levels.md and DIR/im2col_levels.json (DIR: benchmarks/results/im2col_levels).
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

TAPS = ((0, 0), (0, 1), (1, 0), (1, 1))
CONV = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)  # stride, padding, dilation, transposed, output padding, groups
# (level, hidden channels = input channels, map side) of the default model; batch 128, 5 steps
LEVELS = ((3, 128, 8), (4, 256, 4))
BATCH, STEPS = 128, 5


def im2col(xp: torch.Tensor) -> torch.Tensor:
    """(N, C, H+1, W+1) zero-bordered -> col (N*H*W, 4C), columns (dy, dx, c)."""
    x = xp.permute(0, 2, 3, 1)  # (N, H+1, W+1, C), a view of a channels-last tensor
    H, W = x.shape[1] - 1, x.shape[2] - 1
    return torch.cat([x[:, dy:dy + H, dx:dx + W, :] for dy, dx in TAPS], dim=-1).reshape(-1, 4 * x.shape[-1])


def weight_matrix(w: torch.Tensor) -> torch.Tensor:
    """(O, C, 2, 2) -> Wm (4C, O), rows (dy, dx, c)."""
    return w.permute(2, 3, 1, 0).reshape(4 * w.shape[1], w.shape[0]).contiguous()


def col2im(dcol: torch.Tensor, n: int, c: int, h: int, w: int) -> torch.Tensor:
    """d col (N*H*W, 4C) -> d X (N, C, H+1, W+1): each tap block added back at its shift (the check only)."""
    d = dcol.reshape(n, h, w, 4, c)
    out = torch.zeros(n, h + 1, w + 1, c, dtype=dcol.dtype, device=dcol.device)
    for k, (dy, dx) in enumerate(TAPS):
        out[:, dy:dy + h, dx:dx + w, :] += d[:, :, :, k, :]
    return out.permute(0, 3, 1, 2)


def rows_as_nchw(m: torch.Tensor, n: int, h: int, w: int) -> torch.Tensor:
    """(N*H*W, O) channels-last rows -> the (N, O, H, W) view."""
    return m.reshape(n, h, w, -1).permute(0, 3, 1, 2)


def calls(n: int, c: int, side: int, dtype, device):
    """The three products for ``n`` images of a level: {name: (cudnn_fn, gemm_fn, check)}; the inputs random."""
    g = 4 * c
    cl = torch.channels_last
    xp = torch.zeros(n, c, side + 1, side + 1, device=device, dtype=dtype).to(memory_format=cl)
    xp[:, :, :side, :side] = torch.randn(n, c, side, side, device=device, dtype=dtype)
    w = (torch.randn(g, c, 2, 2, device=device, dtype=dtype) / (4 * c) ** 0.5).to(memory_format=cl)
    dy = torch.randn(n, g, side, side, device=device, dtype=dtype).to(memory_format=cl)
    col, wm = im2col(xp), weight_matrix(w)
    dy_rows = dy.permute(0, 2, 3, 1).reshape(-1, g)
    return {
        "forward": (lambda: F.conv2d(xp, w), lambda: col @ wm,
                    lambda a, b: (a, rows_as_nchw(b, n, side, side))),
        "data gradient": (lambda: torch.ops.aten.convolution_backward(dy, xp, w, None, *CONV, [True, False, False])[0],
                          lambda: dy_rows @ wm.t(),
                          lambda a, b: (a, col2im(b, n, c, side, side))),
        "weight gradient": (lambda: torch.ops.aten.convolution_backward(dy, xp, w, None, *CONV,
                                                                        [False, True, False])[1],
                            lambda: col.t() @ dy_rows,
                            lambda a, b: (a, b.reshape(2, 2, c, g).permute(3, 2, 0, 1))),
    }, (lambda: im2col(xp))


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def check() -> None:
    """The three identities in float64 on the CPU at small sizes (2 images, 3 channels, 5 x 5)."""
    torch.manual_seed(0)
    products, _ = calls(2, 3, 5, torch.float64, "cpu")
    for name, (ref, gemm, pair) in products.items():
        a, b = pair(ref(), gemm())
        err = rel(b, a)
        print(f"{name}: relative difference {err:.2e}")
        assert err < 1e-12, name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/im2col_levels")
    ap.add_argument("--check", action="store_true", help="the identities in float64 on the CPU, then exit")
    args = ap.parse_args()
    if args.check:
        check()
        return
    import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
    from bench_train_cells import graph_ms  # noqa: E402

    torch.backends.cudnn.benchmark = True
    rows = []
    for level, c, side in LEVELS:
        # per step (the recurrent convolution and its data gradient), the input convolution over all steps, and
        # the recurrent weight gradient over the 4 steps that have one
        for images, what in ((BATCH, "a step's recurrent"), (BATCH * STEPS, "the input (5 steps)"),
                             (BATCH * (STEPS - 1), "the recurrent (4 steps)")):
            torch.manual_seed(level)
            products, gather = calls(images, c, side, torch.bfloat16, "cuda")
            for name, (ref, gemm, pair) in products.items():
                if (what == "the recurrent (4 steps)") != (name == "weight gradient"):
                    continue
                a, b = pair(ref(), gemm())
                flop = 2 * images * side * side * (4 * c) * (4 * c)
                cudnn_ms, gemm_ms = graph_ms(ref), graph_ms(gemm)
                rows.append(dict(level=level, product=f"{what} {name}", images=images, gflop=round(flop / 1e9, 2),
                                 cudnn_us=round(cudnn_ms * 1e3, 1), gemm_us=round(gemm_ms * 1e3, 1),
                                 im2col_us=round(graph_ms(gather) * 1e3, 1) if name != "data gradient" else None,
                                 gemm_speedup=round(cudnn_ms / gemm_ms, 2),
                                 cudnn_tflops=round(flop / cudnn_ms / 1e9, 0),
                                 gemm_tflops=round(flop / gemm_ms / 1e9, 0),
                                 rel_diff=float(f"{rel(b, a):.2e}")))
                print(rows[-1], flush=True)
    sweep_report.table(
        args.out, "im2col_levels", "bench_im2col_levels.py",
        "Levels 3-4's ConvLSTM convolutions: cuDNN against cuBLAS on an im2col",
        "bf16, channels-last, graphed replays (median of 30), L2 warm as in the step. im2col: torch's gather of the "
        "four shifted views (what the cell kernel would write beside h_t instead).",
        ["level", "product", "GFLOP", "cuDNN us", "GEMM us", "GEMM vs cuDNN", "cuDNN TFLOP/s", "GEMM TFLOP/s",
         "im2col gather us", "rel. diff"], rows,
        lambda r: (r["level"], r["product"], r["gflop"], r["cudnn_us"], r["gemm_us"], f"{r['gemm_speedup']:.2f}x",
                   f"{r['cudnn_tflops']:.0f}", f"{r['gemm_tflops']:.0f}",
                   "" if r["im2col_us"] is None else r["im2col_us"], f"{r['rel_diff']:.1e}"))


if __name__ == "__main__":
    main()
