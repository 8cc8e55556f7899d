"""The thesis's component table (Encoder / ConvLSTM / Total) on the thesis workload, CPU vs GPU columns.

Workload (BENCHMARKS.md "thesis"): 36,000 steps x 30 sensors -> signature matrices at scales (10, 30, 60), gap 10
-> 3,595 segments -> 3,591 windows of 5 steps; batch 128 (28 full batches + one of 7). One training epoch:
    Encoder    conv1..conv4 forward + backward (weights' and inputs' gradients) over every batch
    ConvLSTM   the four levels' ConvLSTM + temporal attention (the model's ``AttnConvLSTM``, reference backend, i.e.
               cuDNN convolutions per step), forward + backward over every batch, fed the encoder's outputs
    Total      the whole training step (forward, MSE against the last step, backward, Adam) over every batch
Columns: CPU (PyTorch on all the machine's cores; the mean of a few timed batches scaled to the epoch, said in the
table), GPU cuDNN (``conv_backend="torch"``), GPU global memory (``im2col-global``), GPU shared memory
(``im2col-shared``), GPU implicit GEMM (``implicit``); each GPU column with its ratio to cuDNN and its speed-up
over the CPU. Only the encoder convolutions change between the GPU columns; the ConvLSTM row runs the same code in
every GPU column (it shows what the thesis's second bottleneck costs next to the encoder).

Correctness first: the whole network's output and conv1's weight gradient under each backend against the cuDNN
backend with the same weights. Writes thesis_table.json and thesis_table.md to --out.

Usage: PYTHONPATH=src python3 benchmarks/thesis_table.py [--out benchmarks/results] [--cpu-batches 2]
"""
from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from mscred.atomic import atomic_path
from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.signature import signature_matrices

STEPS, BATCH = 5, 128
COLUMNS = {"cpu": "torch", "cudnn": "torch", "global": "im2col-global", "shared": "im2col-shared",
           "implicit": "implicit"}
LABELS = {"cpu": "CPU", "cudnn": "GPU cuDNN", "global": "GPU global memory", "shared": "GPU shared memory",
          "implicit": "GPU implicit GEMM"}


def thesis_windows(device) -> torch.Tensor:
    """(3591, 5, 3, 30, 30) windows (a view) of the signature matrices of a 36,000 x 30 random-walk series."""
    rng = np.random.default_rng(0)
    series = np.cumsum(rng.standard_normal((36_000, 30)), axis=0)
    series = (series - series.min(0)) / (series.max(0) - series.min(0))   # min-max normalised like training data
    segs = torch.from_numpy(signature_matrices(series, windows=(10, 30, 60), gap=10)).to(device)  # (3595, 3, 30, 30)
    return segs.unfold(0, STEPS, 1).permute(0, 4, 1, 2, 3)                # (3591, 5, 3, 30, 30)


def batches(windows: torch.Tensor, limit: int | None = None):
    starts = range(0, windows.shape[0], BATCH)
    for i, s in enumerate(starts):
        if limit is not None and i >= limit:
            return
        yield windows[s:s + BATCH].contiguous()


def make_net(base: MSCREDNet, conv_backend: str, device) -> MSCREDNet:
    net = copy.deepcopy(base)
    for conv in (net.encoder.conv1, net.encoder.conv2, net.encoder.conv3, net.encoder.conv4):
        conv.backend = conv_backend
    return net.to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_components(net: MSCREDNet, windows: torch.Tensor, device, limit: int | None, repeats: int) -> dict:
    """Seconds of each component over the batches (all of them, or the first ``limit``), median of repeats."""
    opt = torch.optim.Adam(net.parameters(), lr=2e-4)

    def encoder(xb):
        levels = net.encoder(xb)
        torch.autograd.backward(levels, [torch.ones_like(f) * 1e-3 for f in levels])

    def convlstm(levels):
        outs = [lstm(f) for lstm, f in zip(net.lstms, levels)]
        torch.autograd.backward(outs, [torch.ones_like(a) * 1e-3 for a in outs])

    def total(xb):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(xb), xb[:, -1])
        loss.backward()
        opt.step()

    # The ConvLSTM's inputs: the encoder's outputs of each batch, leaves that need gradients (as in training).
    with torch.no_grad():
        feats = [[f.detach() for f in net.encoder(xb)] for xb in batches(windows, limit)]
    feats = [[f.requires_grad_() for f in lv] for lv in feats]
    work = {"encoder": (encoder, list(batches(windows, limit))), "convlstm": (convlstm, feats),
            "total": (total, list(batches(windows, limit)))}
    out = {}
    for name, (fn, items) in work.items():
        fn(items[0])  # warm-up (allocator, cuDNN plans, extension build)
        fn(items[-1])
        runs = []
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            for item in items:
                fn(item)
            sync(device)
            runs.append(time.perf_counter() - t0)
        out[name] = statistics.median(runs)
    return out


def check(base: MSCREDNet, windows: torch.Tensor, backend: str, device) -> dict:
    xb = windows[:BATCH].contiguous()
    outs = {}
    for b in ("torch", backend):
        net = make_net(base, b, device)
        loss = F.mse_loss(net(xb), xb[:, -1])
        (g,) = torch.autograd.grad(loss, net.encoder.conv1.weight)
        outs[b] = (net(xb).detach().double(), g.double())
    (y0, g0), (y1, g1) = outs["torch"], outs[backend]
    err_y = ((y1 - y0).norm() / y0.norm()).item()
    err_g = ((g1 - g0).norm() / g0.norm()).item()
    return {"rel_err_output": err_y, "rel_err_conv1_grad": err_g, "ok": bool(err_y < 1e-2 and err_g < 1e-2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--cpu-batches", type=int, default=2, help="batches timed on the CPU (scaled to the epoch)")
    ap.add_argument("--repeats", type=int, default=3, help="GPU epochs timed per component (median)")
    ap.add_argument("--device", default="cuda", help="the 'GPU' columns' device (cpu only to smoke-test the script)")
    ap.add_argument("--windows", type=int, default=None, help="use only the first N windows (smoke tests)")
    ap.add_argument("--batch", type=int, default=128, help="windows per batch (the thesis's 128)")
    args = ap.parse_args(argv)
    global BATCH
    BATCH = args.batch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("thesis_table: needs a CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    cuda, cpu = torch.device(args.device), torch.device("cpu")
    base = MSCREDNet(ModelConfig(n_sensors=30, n_scales=3))
    windows = thesis_windows(cuda)[:args.windows]
    n_windows = windows.shape[0]
    n_batches = -(-n_windows // BATCH)

    results, checks = {}, {}
    for col, backend in COLUMNS.items():
        if col == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
            net = make_net(base, backend, cpu)
            part = time_components(net, windows.cpu(), cpu, args.cpu_batches, 1)
            # the timed batches are full ones: scale by the epoch's windows, not its batch count
            results[col] = {k: v * n_windows / (BATCH * args.cpu_batches) for k, v in part.items()}
        else:
            if backend != "torch":
                checks[col] = check(base, windows, backend, cuda)
            results[col] = time_components(make_net(base, backend, cuda), windows, cuda, None, args.repeats)
        print(f"{col:9s} " + "  ".join(f"{k} {v:8.3f} s" for k, v in results[col].items())
              + (f"  check {checks[col]}" if col in checks else ""), flush=True)

    meta = {"gpu": torch.cuda.get_device_name() if cuda.type == "cuda" else "no GPU (smoke test)", "cpu_threads": torch.get_num_threads(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "windows": n_windows, "batch": BATCH, "batches": n_batches, "cpu_batches_timed": args.cpu_batches,
            "command": "PYTHONPATH=src python3 benchmarks/thesis_table.py " + " ".join(argv or sys.argv[1:])}
    lines = [f"# Thesis table: one training epoch of the thesis workload ({n_windows} windows, batch {BATCH}, n = 30)",
             "", f"{meta['gpu']}; CPU = {meta['cpu_threads']} threads of the same machine "
             f"({args.cpu_batches} batches timed, scaled to the epoch); torch {meta['torch']}, CUDA {meta['cuda']}, "
             f"cuDNN {meta['cudnn']}; {meta['date']}. Seconds per epoch (forward + backward); in brackets: "
             "x faster than GPU cuDNN / x faster than CPU. Command: `" + meta["command"] + "`", "",
             "| component | " + " | ".join(LABELS[c] for c in COLUMNS) + " |",
             "| --- |" + " --- |" * len(COLUMNS)]
    for comp, label in (("encoder", "Encoder"), ("convlstm", "ConvLSTM (+ attention)"), ("total", "Total")):
        cells = []
        for col in COLUMNS:
            v = results[col][comp]
            if col == "cpu":
                cells.append(f"{v:.3f}")
            else:
                cells.append(f"{v:.4f} ({results['cudnn'][comp] / v:.2f}x / {results['cpu'][comp] / v:.1f}x)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Correctness (whole network, vs the cuDNN backend, same weights): "
              + "; ".join(f"{LABELS[c]}: {'ok' if v['ok'] else 'WRONG'} (output {v['rel_err_output']:.1e}, "
                          f"conv1 grad {v['rel_err_conv1_grad']:.1e})" for c, v in checks.items())]
    out = Path(args.out)
    with atomic_path(out / "thesis_table.json") as p:
        p.write_text(json.dumps({"meta": meta, "seconds": results, "checks": checks}, indent=2))
    with atomic_path(out / "thesis_table.md") as p:
        p.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
