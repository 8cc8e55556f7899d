"""The training ConvLSTM's convolutions on [x_t, h_{t-1}] concatenated, against the split input / recurrent calls.

Today (``convlstm_train``) a level's forward runs the input convolution of all T steps in one call and the recurrent
convolution per step, and the cell kernel reads both gate tensors and writes their sum (``pre``) for the backward;
the backward runs the recurrent data gradient per step, then the input convolution's data and weight gradients over
all steps and the recurrent weight gradient -- two weight-gradient passes over the gate gradients.

The alternative measured here keeps x_t and h_{t-1} side by side in one zero-bordered buffer xh (T*B, C + Ch, Hp, Wp)
(x copied in once; h written by the cell kernel), so that per step ONE convolution with the whole gate weight gives
the pre-activations, written straight into ``pre[t]`` (``aten.cudnn_convolution.out``): the cell kernel would read one
gate tensor and write none. Backward: per step one transposed convolution with the whole weight gives [dx_t, dh_{t-1}]
(``cudnn_convolution_transpose.out``), one weight-gradient call over xh gives both weight gradients, and dx_t is
copied out of the per-step outputs. Only the convolutions and copies are timed (the cell kernels' saved bytes are
not: their reads drop from gx + gh to one tensor and the pre store goes). Both out= calls turned out to copy: the
transposed one is PyTorch's generated new-tensor-and-copy, and the training step's profile shows a device copy after
each ``cudnn_convolution.out`` (``results/concat_step/``), so the concatenated rows here include those copies; the
product's path (``ops/triton/convlstm_concat.py``) uses each call's own output instead.

Per level (batch 128, 5 steps, 2 x 2 kernel, bf16 channels-last), each variant captured in a CUDA graph and replayed
(CUDA-event median of 20 after 5 warm-ups); the results are compared with the split calls' (gates: pre vs gx + gh;
dx, dw).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_concat_gates.py [--out DIR]
Writes DIR/concat_gates.md and DIR/concat_gates.json.
"""
from __future__ import annotations

import argparse

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed, _rel_diff  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

T, B, K = 5, 128, 2
LEVELS = [(32, 30), (64, 15), (128, 8), (256, 4)]
CONV = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)  # stride, padding, dilation, transposed, output padding, groups


def _flags():
    return (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32)


def _buffers(C: int, n: int):
    cl, bf, dev = torch.channels_last, torch.bfloat16, "cuda"
    hp = n + K - 1

    def image(count, ch, side, scale=1.0):
        return (torch.randn(count, ch, side, side, device=dev) * scale).to(bf).contiguous(memory_format=cl)

    xp, dpre = image(T * B, C, hp), image(T * B, 4 * C, n, 0.01)
    hprev = image((T - 1) * B, C, hp)
    w = (torch.randn(4 * C, 2 * C, K, K, device=dev) / (8 * C) ** 0.5).to(bf).contiguous(memory_format=cl)
    w_x, w_h = w[:, :C].contiguous(memory_format=cl), w[:, C:].contiguous(memory_format=cl)
    xh = torch.zeros(T * B, 2 * C, hp, hp, device=dev, dtype=bf).contiguous(memory_format=cl)
    xh[B:, C:] = hprev  # h_{t-1} beside x_t for t >= 1; h_{-1} = 0
    pre = torch.empty(T * B, 4 * C, n, n, device=dev, dtype=bf).contiguous(memory_format=cl)
    dxh = torch.empty(T * B, 2 * C, hp, hp, device=dev, dtype=bf).contiguous(memory_format=cl)
    dxp = torch.empty_like(xp)
    return dict(C=C, xp=xp, hprev=hprev, dpre=dpre, w=w, w_x=w_x, w_h=w_h, xh=xh, pre=pre, dxh=dxh, dxp=dxp)


def split_fwd(b):
    gx = torch.nn.functional.conv2d(b["xp"], b["w_x"])
    gh = [torch.nn.functional.conv2d(b["hprev"][t * B:(t + 1) * B], b["w_h"]) for t in range(T - 1)]
    return gx, gh


def concat_fwd(b):
    C, xh, pre = b["C"], b["xh"], b["pre"]
    xh[:, :C].copy_(b["xp"])
    torch.ops.aten.cudnn_convolution.out(b["xp"][:B], b["w_x"], [0, 0], [1, 1], [1, 1], 1, *_flags(), out=pre[:B])
    for t in range(1, T):
        s = slice(t * B, (t + 1) * B)
        torch.ops.aten.cudnn_convolution.out(xh[s], b["w"], [0, 0], [1, 1], [1, 1], 1, *_flags(), out=pre[s])
    return pre


def split_bwd(b):
    dpre = b["dpre"]
    dh = [torch.ops.aten.convolution_backward(dpre[t * B:(t + 1) * B], b["hprev"][(t - 1) * B:t * B], b["w_h"], None,
                                              *CONV, [True, False, False])[0] for t in range(T - 1, 0, -1)]
    dw_h = torch.ops.aten.convolution_backward(dpre[B:], b["hprev"], b["w_h"], None, *CONV, [False, True, False])[1]
    dx, dw_x, _ = torch.ops.aten.convolution_backward(dpre, b["xp"], b["w_x"], None, *CONV, [True, True, False])
    return dx, torch.cat([dw_x, dw_h], 1), dh


def concat_bwd(b):
    C, dpre, dxh, dxp = b["C"], b["dpre"], b["dxh"], b["dxp"]
    for t in range(T - 1, 0, -1):
        s = slice(t * B, (t + 1) * B)
        torch.ops.aten.cudnn_convolution_transpose.out(dpre[s], b["w"], [0, 0], [0, 0], [1, 1], [1, 1], 1, *_flags(),
                                                       out=dxh[s])
    torch.ops.aten.cudnn_convolution_transpose.out(dpre[:B], b["w_x"], [0, 0], [0, 0], [1, 1], [1, 1], 1, *_flags(),
                                                   out=dxp[:B])
    dxp[B:].copy_(dxh[B:, :C])
    dw = torch.ops.aten.convolution_backward(dpre, b["xh"], b["w"], None, *CONV, [False, True, False])[1]
    return dxp, dw, [dxh[t * B:(t + 1) * B, C:] for t in range(T - 1, 0, -1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/concat_gates")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True  # as the training step's warm-up
    rows = []
    for C, n in LEVELS:
        b = _buffers(C, n)
        gx, gh = split_fwd(b)
        want = torch.cat([gx[:B]] + [gx[(t + 1) * B:(t + 2) * B] + gh[t] for t in range(T - 1)])
        got = concat_fwd(b)
        fwd_diff = _rel_diff([got], [want])
        ref, new = split_bwd(b), concat_bwd(b)
        bwd_diff = _rel_diff([new[0], new[1]] + new[2], [ref[0], ref[1]] + ref[2])
        for name, fn, diff in (("forward, split", split_fwd, 0.0), ("forward, concatenated", concat_fwd, fwd_diff),
                               ("backward, split", split_bwd, 0.0), ("backward, concatenated", concat_bwd, bwd_diff)):
            ms = median_event_ms(_graphed(fn, (b,)).replay, iters=20)
            rows.append(dict(level=f"{C} x {n} x {n}", variant=name, ms=ms, rel_diff=diff))
            print(rows[-1], flush=True)
        del b
    meta = (f"{sweep_report.machine_line()}. Per level: the ConvLSTM's convolutions (and, concatenated, the copies of "
            "x in and dx out) forward and backward, split input / recurrent against [x_t, h_{t-1}] concatenated. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_concat_gates.py`.")
    lines = ["# The ConvLSTM's convolutions on [x_t, h_{t-1}] concatenated (batch 128, bf16, 5 steps)", "", meta, "",
             "| level (C x H x W) | variant | ms | vs split | largest difference from split (relative) |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["level"] == r["level"]
                    and q["variant"] == r["variant"].split(",")[0] + ", split")
        lines.append(f"| {r['level']} | {r['variant']} | {r['ms']:.4f} | {base / r['ms']:.2f}x | {r['rel_diff']:.1e} |")
    sweep_report.write(args.out, "concat_gates", meta, rows, lines)


if __name__ == "__main__":
    main()
