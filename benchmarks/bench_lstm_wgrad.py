"""The training ConvLSTM's weight gradients: ops/triton/lstm_wgrad.py against cuDNN, at the training step's shapes.

Per level (batch 128, 5 steps, 30 sensors: 32 x 30 x 30 ... 256 x 4 x 4 hidden channels x pixels, 2 x 2 kernel,
bf16 channels-last time-major buffers as ``convlstm_train_backward`` has them), the backward's convolution work
after the cell kernels, captured in a CUDA graph and replayed (CUDA-event median of 20 after 5 warm-ups):

* cuDNN (the default): the recurrent weight gradient over the (T-1)*B h images, then the input convolution's data
  and weight gradients in one ``convolution_backward`` over the T*B images -- two weight-gradient passes over dpre;
* ours: ``lstm_weight_grads`` (both weight gradients, one pass over dpre) and the data gradient alone from cuDNN,
  under each ``MSCRED_LSTM_WGRAD_TILE`` setting (BLOCK_P/BLOCK_O/BLOCK_N/warps/programs per SM).

The weight gradients are compared with cuDNN's (largest difference relative to the largest magnitude; both bf16).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_lstm_wgrad.py [--out DIR]
Writes DIR/lstm_wgrad.md and DIR/lstm_wgrad.json.
"""
from __future__ import annotations

import argparse
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed, _rel_diff  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

T, B, K = 5, 128, 2
LEVELS = [(32, 30), (64, 15), (128, 8), (256, 4)]
TILES = ["64/64/64/4/2", "64/64/64/8/2", "64/128/64/8/2", "128/64/64/8/2", "64/64/128/8/2", "64/64/64/4/4",
         "32/64/64/4/4", "128/128/128/8/1"]
ARGS = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)


def _buffers(C: int, n: int):
    cl, bf = torch.channels_last, torch.bfloat16
    dpre = (torch.randn(T * B, 4 * C, n, n, device="cuda") * 0.01).to(bf).contiguous(memory_format=cl)
    xp = torch.randn(T * B, C, n + K - 1, n + K - 1, device="cuda").to(bf).contiguous(memory_format=cl)
    hp = torch.randn((T - 1) * B, C, n + K - 1, n + K - 1, device="cuda").to(bf).contiguous(memory_format=cl)
    w = torch.randn(4 * C, C, K, K, device="cuda").to(bf).contiguous(memory_format=cl)
    return dpre, xp, hp, w


def cudnn(dpre, xp, hp, w):
    dw_h = torch.ops.aten.convolution_backward(dpre[B:], hp, w, None, *ARGS, [False, True, False])[1]
    dx, dw_x, _ = torch.ops.aten.convolution_backward(dpre, xp, w, None, *ARGS, [True, True, False])
    return dx, dw_x, dw_h


def ours(dpre, xp, hp, w):
    from mscred.ops.triton.lstm_wgrad import lstm_weight_grads
    dw_x, dw_h = lstm_weight_grads(dpre, xp, hp, B, K, w.dtype)
    dx = torch.ops.aten.convolution_backward(dpre, xp, w, None, *ARGS, [True, False, False])[0]
    return dx, dw_x, dw_h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/lstm_wgrad")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True  # as the training step's warm-up
    rows = []
    for C, n in LEVELS:
        bufs = _buffers(C, n)
        ref = [t.clone() for t in cudnn(*bufs)]
        base = median_event_ms(_graphed(cudnn, bufs).replay, iters=20)
        rows.append(dict(level=f"{C} x {n} x {n}", variant="cuDNN", ms=base, rel_diff=0.0))
        print(rows[-1], flush=True)
        for setting in TILES:
            os.environ["MSCRED_LSTM_WGRAD_TILE"] = setting
            got = ours(*bufs)  # compiles this setting outside the capture
            rows.append(dict(level=f"{C} x {n} x {n}", variant=setting, base=base,
                             ms=median_event_ms(_graphed(ours, bufs).replay, iters=20),
                             rel_diff=_rel_diff(got[1:], ref[1:])))
            print(rows[-1], flush=True)
        del os.environ["MSCRED_LSTM_WGRAD_TILE"]
    meta = (f"{sweep_report.machine_line()}. Per level: cuDNN's two weight-gradient passes + data gradient against "
            "lstm_weight_grads + cuDNN's data gradient. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_lstm_wgrad.py`.")
    lines = ["# The ConvLSTM's weight gradients in one pass over dpre, against cuDNN (batch 128, bf16)", "", meta, "",
             "| level (C x H x W) | variant | ms | vs cuDNN | weight gradients' largest difference (relative) |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["level"] == r["level"] and q["variant"] == "cuDNN")
        lines.append(f"| {r['level']} | {r['variant']} | {r['ms']:.4f} | {base / r['ms']:.2f}x | {r['rel_diff']:.1e} |")
    sweep_report.write(args.out, "lstm_wgrad", meta, rows, lines)


if __name__ == "__main__":
    main()
