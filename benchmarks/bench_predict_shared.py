"""Scoring every window: the shared-segment path of ``predict`` (``MSCREDNet.forward_windows``) against the
per-window forward it replaced, same network, same segments, in one run.

Default: CPU, reference backend, n = 30 sensors, 260 segments (256 windows), batch 256; the two outputs agree to
float rounding (the shared path sums the gate convolution in two parts: ops/convlstm_sliding.py).
On a CUDA machine ``--device cuda --backend fused [--bf16]`` times the fused path (not run yet).

Usage: PYTHONPATH=src python3 benchmarks/bench_predict_shared.py [--device cpu] [--backend reference] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime as dt
import platform
import time
from pathlib import Path

import numpy as np
import torch

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.train import WindowDataset, predict
from mscred.train_graphs import EagerInference


def per_window(net, seg, batch, device, bf16):
    """The previous eager path: gather each batch of windows (B, steps, K, n, n), forward, keep the recon."""
    data = WindowDataset(seg, 5).to(device)
    infer = EagerInference(net, data, bf16)
    outs = [infer(torch.arange(s, min(s + batch, len(data)), device=device))[0] for s in range(0, len(data), batch)]
    return torch.cat(outs).float().cpu().numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--segments", type=int, default=260)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend=args.backend)).to(device).eval()
    seg = np.random.default_rng(0).random((args.segments, 3, 30, 30)).astype(np.float32)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    old_t, new_t = [], []
    for _ in range(args.repeats + 1):  # the first round warms up
        sync(); t = time.perf_counter(); old = per_window(net, seg, args.batch, device, args.bf16); sync()
        old_t.append(time.perf_counter() - t)
        sync(); t = time.perf_counter(); new = predict(net, seg, args.batch, device, bf16=args.bf16); sync()
        new_t.append(time.perf_counter() - t)
    diff = float(np.abs(old - new).max())
    t_old, t_new = float(np.median(old_t[1:])), float(np.median(new_t[1:]))
    windows = args.segments - 4
    text = (f"# predict: shared segments vs per-window forward ({args.device}, {args.backend}"
            f"{', bf16' if args.bf16 else ''})\n\n"
            f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}, torch {torch.__version__}, "
            f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads. Command: "
            f"`PYTHONPATH=src python3 benchmarks/bench_predict_shared.py --device {args.device} --backend "
            f"{args.backend}{' --bf16' if args.bf16 else ''}`. n = 30, {windows} windows, batch {args.batch}, "
            f"median of {args.repeats} after one warm-up round.\n\n"
            f"| path | seconds | windows / s |\n| --- | --- | --- |\n"
            f"| per-window forward (before) | {t_old:.3f} | {windows / t_old:,.0f} |\n"
            f"| shared segments (`predict` now) | {t_new:.3f} | {windows / t_new:,.0f} |\n\n"
            f"Speed-up {t_old / t_new:.2f}x; largest difference between the two outputs {diff:.1e}.\n")
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"predict_shared_{args.device}_{args.backend}.md").write_text(text)


if __name__ == "__main__":
    main()
