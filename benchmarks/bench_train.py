"""Training and inference speed of MSCRED on one GPU: plain PyTorch vs torch.compile vs the fused Triton backend.

One run, side by side (BENCHMARKS.md items 2 and 3, issue 3 item 5), on the thesis workload (36,000 steps x 30
sensors, scales 10/30/60, gap 10 -> 3,595 segments -> 3,591 windows of 5 steps):

    variants   reference eager (the baseline) | reference + CUDA graph | reference + graph + bf16 |
               torch.compile(reference) | fused eager | fused eager + bf16 | fused + CUDA graph |
               fused + graph + bf16 | reference eager with foreach Adam (the fused-Adam ablation). Every training
               variant runs the Trainer's own step objects (mscred.train_graphs.EagerStep / GraphedStep) and Adam
               as the Trainer builds it (fused on CUDA), so the product path is what is measured.
    measures   training step at batch 128 (ms, windows/s); inference windows/s at batch 256 / 1024 / all windows
               (EagerInference / GraphedInference); the end-to-end workload on the product path (signature
               matrices + 5 epochs of Trainer.fit + predict and the count score of every window at the variant's
               best inference batch), with one-time graph capture and a cold first run reported apart; the FLOP
               floor of the step and of inference at the measured matrix rates; torch.profiler kernel tables
               (fused eager + bf16, reference eager, and the graphed fused + bf16 step if the profiler sees graph
               kernels); with --level-ops, per-level ConvLSTM and attention timings.

Parts run in separate processes, one after another: "eager" (no CUDA graph), then one process per graphed
variant, so that no process ever holds more than one live CUDA graph (see TRAIN_VARIANTS for the crash this
avoids), and a crash or a device-side assert loses only its own part. "compile" starts at once beside them on the
other half of the CPU cores, compiles, and times only when the others are done. The JSON of every part is saved
after every item and merged at the end into ``train.json`` / ``train.md`` / ``train_profile.txt`` in --out.

Correctness first, in the same run: the whole model's loss and every gradient, fused vs reference, in float64
(CPU only; the tests cover it on CUDA), float32 and bf16; and per training variant, its first step's loss against
the reference eager's (same weights, same batch): a wrong variant is marked WRONG in the table. Times are
CUDA-event medians after warm-up on random (never zero) data.

    PYTHONPATH=src python3 benchmarks/bench_train.py --out benchmarks/results   # ~150 s warm, ~300 s cold (H200)
    PYTHONPATH=src python benchmarks/bench_train.py --quick --out /tmp/b    # CPU smoke test (Triton interpreter)
"""
from __future__ import annotations

import time

T_IMPORT = time.perf_counter()  # before torch is imported: the "e2e-cold" part measures from here

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

if not torch.cuda.is_available():  # CPU smoke test: the Triton kernels run on the interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch.nn.functional as F  # noqa: E402

from mscred import detect  # noqa: E402
from mscred.config import ModelConfig, TrainConfig  # noqa: E402
from mscred.model import MSCREDNet  # noqa: E402
from mscred.packed_adam import make_adam  # noqa: E402
from mscred.ops import reference  # noqa: E402
from mscred.ops.triton import attention as fused_attention  # noqa: E402
from mscred.ops.triton import convlstm as fused_convlstm  # noqa: E402
from mscred.signature import signature_matrices  # noqa: E402
from mscred.train import Trainer, WindowDataset, predict  # noqa: E402
from mscred.train_graphs import (EagerInference, EagerStep, GraphedInference, GraphedStep,  # noqa: E402
                                 GraphedWindowInference, autocast)

STEPS = 5
WINDOWS = (10, 30, 60)
GAP = 10
CHANNELS = (32, 64, 128, 256)  # the paper's; --quick shrinks them


# ------------------------------------------------------------------------------------------------ helpers
class Clock:
    """Per-call GPU time by CUDA events (host clock on the CPU); ``median`` in ms."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.times: list[float] = []

    @contextlib.contextmanager
    def __call__(self):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self.times.append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self.times.append(time.perf_counter() - t0)

    def median(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
            ms = [s.elapsed_time(e) for s, e in self.times]
        else:
            ms = [1e3 * t for t in self.times]
        return statistics.median(ms)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def rel(a, b) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def thesis_series(T: int, n: int, seed: int = 0) -> np.ndarray:
    """A (T, n) series like the paper's sensors (sin/cos of random phase and period plus noise), min-max scaled."""
    rng = np.random.default_rng(seed)
    t = np.arange(T)[:, None]
    t0, omega = rng.uniform(50, 100, n), rng.uniform(40, 50, n)
    base = np.where(rng.random(n) < 0.5, np.sin((t - t0) / omega), np.cos((t - t0) / omega))
    x = base + 0.3 * rng.standard_normal((T, n))
    lo, hi = x.min(0), x.max(0)
    return (x - lo) / (hi - lo)


def build(backend: str, n: int, device, seed: int = 0, capturable: bool = False, dtype=torch.float32,
          fused_adam: bool = True):
    """The net (seeded: every variant starts from the same weights) and Adam as the Trainer builds it
    (``make_adam``: torch's fused on CUDA, the fused backend's packed weights by our kernel; unless ``fused_adam``
    is False, the ablation: torch's multi-tensor Adam)."""
    torch.manual_seed(seed)
    net = MSCREDNet(ModelConfig(n_sensors=n, backend=backend, channels=CHANNELS)).to(device=device, dtype=dtype)
    if not fused_adam:
        return net, torch.optim.Adam(net.parameters(), lr=2e-4, capturable=capturable, fused=False)
    opt = make_adam(net.parameters(), device, backend, lr=2e-4, capturable=capturable,
                    fused=device.type == "cuda")
    return net, opt


# ------------------------------------------------------------------------------------------------ validation
def loss_and_grads(net, x, bf16):
    net.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16 and x.is_cuda):
        recon = net(x)
    loss = F.mse_loss(recon.to(x.dtype), x[:, -1])
    loss.backward()
    return loss.detach(), {k: p.grad.detach().clone() for k, p in net.named_parameters()}


def validate(data: WindowDataset, n: int, device, batch: int) -> dict:
    """Fused vs reference on one batch: loss and the worst relative gradient error over all parameters."""
    out = {}
    idx = torch.randperm(len(data), device=device)[:batch]
    x32 = data.batch(idx)
    for name, dtype, bf16, bound in (("float64", torch.float64, False, 1e-9), ("float32", torch.float32, False, 1e-2),
                                     ("bf16_autocast", torch.float32, True, None)):
        if bf16 and device.type != "cuda":
            continue
        if dtype == torch.float64 and device.type == "cuda":
            continue  # float64 is checked by the tests (CPU interpreter and CUDA); spare the run its compilations
        x = x32.to(dtype)
        b = batch if dtype != torch.float64 else min(batch, 16)
        results = {}
        for backend in ("reference", "fused"):
            net, _ = build(backend, n, device, dtype=dtype)
            results[backend] = loss_and_grads(net, x[:b], bf16)
        (lr, gr), (lf, gf) = results["reference"], results["fused"]
        worst = max(gr, key=lambda k: rel(gf[k], gr[k]))
        row = {"loss_reference": lr.item(), "loss_fused": lf.item(), "loss_rel_err": rel(lf, lr),
               "grad_worst_rel_err": rel(gf[worst], gr[worst]), "grad_worst_param": worst, "batch": b}
        if bound is not None:
            row["ok"] = bool(row["loss_rel_err"] < bound and row["grad_worst_rel_err"] < bound * 10)
        else:  # bf16: judged against the reference's own bf16 error vs float32, below
            net, _ = build("reference", n, device)
            l32, g32 = loss_and_grads(net, x[:b], False)
            ref_err = max(rel(gr[k], g32[k]) for k in g32)
            our_err = max(rel(gf[k], g32[k]) for k in g32)
            row.update(ref_bf16_vs_fp32_grad_err=ref_err, fused_bf16_vs_fp32_grad_err=our_err,
                       ok=bool(our_err <= 2 * ref_err + 1e-3))
        out[name] = row
        print(f"validate {name:14s} loss rel err {row['loss_rel_err']:.2e}  worst grad rel err "
              f"{row['grad_worst_rel_err']:.2e} ({worst})  ok={row['ok']}", flush=True)
    return out


# ------------------------------------------------------------------------------------------------ training step
def make_step(backend, n, data, device, batch, graphs, bf16, compile_=False, fused_adam=True, cudnn_benchmark=None):
    """The Trainer's own step objects (``mscred.train_graphs``): EagerStep, or GraphedStep (warm-up + capture).
    ``cudnn_benchmark``: GraphedStep's option (default: the product's, autotuning on); for eager steps, the
    process-wide flag is set to it (None: left as it is)."""
    net, opt = build(backend, n, device, capturable=graphs, fused_adam=fused_adam)
    t0 = time.perf_counter()
    if compile_:
        net = torch.compile(net)
    if graphs:
        step = GraphedStep(net, opt, data, batch, bf16, **({} if cudnn_benchmark is None else
                                                          {"cudnn_benchmark": cudnn_benchmark}))
    else:
        if cudnn_benchmark is not None:
            torch.backends.cudnn.benchmark = cudnn_benchmark
        step = EagerStep(net, opt, data, bf16)
    sync(device)
    return step, time.perf_counter() - t0


def thesis_eager_step(batch: int):
    """(step, data, idx) on CUDA: the thesis workload's windows (30 sensors), the Trainer's eager fused bf16 step
    with cuDNN autotuning (as the graphed step autotunes), and one random batch of window indices
    (profile_train_step.py and bench_bwd_tiles.py run it)."""
    device = torch.device("cuda")
    values = thesis_series(36_000, 30)
    data = WindowDataset(torch.from_numpy(signature_matrices(values, windows=WINDOWS, gap=GAP)).to(device), STEPS)
    idx = torch.randperm(len(data), device=device)[:batch]
    step, _ = make_step("fused", 30, data, device, batch, False, True, cudnn_benchmark=True)
    return step, data, idx


def time_train(step, data, device, batch, iters, warmup=3, ready=None):
    """Median ms of a training step on random batches; the first call's loss (the initial weights' loss on batch 0,
    the same for every variant) is returned for the correctness check. ``ready`` (optional) is called after the
    warm-up / compilation and before timing (the compile part waits there for the GPU to be free)."""
    g = torch.Generator(device="cpu").manual_seed(1)
    batches = [torch.randperm(len(data), generator=g)[:batch].to(device) for _ in range(8)]
    t0 = time.perf_counter()
    first_loss = float(step(batches[0]))
    for i in range(1, warmup):
        step(batches[i % 8])
    sync(device)
    first = time.perf_counter() - t0
    if ready is not None:
        ready()
    clock = Clock(device)
    losses = []
    for i in range(iters):
        with clock():
            losses.append(step(batches[(warmup + i) % 8]))
    ms = clock.median()
    final = float(torch.stack(losses)[-1])
    return ms, first, final, first_loss


# ------------------------------------------------------------------------------------------------ inference
def time_inference(backend, n, data, device, batch, graphs, bf16, iters):
    net, _ = build(backend, n, device)
    net.eval()
    idx = torch.arange(batch, device=device) % len(data)
    t0 = time.perf_counter()
    infer = GraphedInference(net, data, batch, bf16) if graphs else EagerInference(net, data, bf16)
    return _time_batches(lambda: infer(idx), batch, device, iters, t0)


def _time_batches(run, batch, device, iters, t0):
    """(ms, windows/s, setup s) of ``run()`` (one batch of ``batch`` windows): two warm-up calls, counted with
    whatever happened since ``t0`` as the one-time setup, then the median of ``iters`` CUDA-event timings."""
    for _ in range(2):
        run()
    sync(device)
    setup = time.perf_counter() - t0
    clock = Clock(device)
    for _ in range(iters):
        with clock():
            run()
    ms = clock.median()
    return ms, batch / ms * 1e3, setup


def time_inference_shared(backend, n, data, device, batch, graphs, bf16, iters):
    """(ms, windows/s, setup s) of ``forward_windows`` on ``batch`` consecutive windows (batch + steps - 1
    segments): eager, what ``predict`` runs per batch without CUDA graphs, or replayed from one graph."""
    net, _ = build(backend, n, device)
    net.eval()
    batch = min(batch, len(data))
    seg = data.segments[:batch + data.steps - 1]
    t0 = time.perf_counter()
    graphed = GraphedWindowInference(net, data, batch, bf16) if graphs else None

    def run():
        if graphed is not None:
            return graphed(0, batch)
        with torch.no_grad(), autocast(device, bf16 and device.type == "cuda"):
            return net.forward_windows(seg, data.steps)
    return _time_batches(run, batch, device, iters, t0)


def profile_scoring(n, data, device, batch, path: Path, title: str) -> dict:
    """``profile_step``'s tables for one call of bf16 ``forward_windows`` on every window of ``data`` at once (the
    best inference batch): the kernels the graphed scoring replays, launched eagerly so that CUPTI sees them."""
    net, _ = build("fused", n, device)
    net.eval()

    def score(_idx):
        with torch.no_grad(), autocast(device, True):
            net.forward_windows(data.segments, data.steps)
    return profile_step(score, data, device, batch, path, title)


# ------------------------------------------------------------------------------------------------ end to end
def end_to_end(values, n, device, backend, graphs, bf16, epochs, batch, score_batch, warm=True) -> dict:
    """The thesis workload on the product path, twice in this process (once if not ``warm``): signature matrices (NumPy) ->
    ``Trainer.fit`` with the config flags (``epochs`` epochs; the segments go to the device inside fit) ->
    ``predict`` of every window at ``score_batch`` (one CUDA graph when graphed) -> the count score
    (``detect.scale_scores``, as the detector scores).

    The first run (1 epoch) pays what the process has not paid yet (cuDNN/cuBLAS handles, loading Triton kernels,
    first launches); its wall time is reported as ``first_run_s``. The second run is the measurement: ``total_s``
    = signature + the epochs + scoring, with its one-time graph warm-up / capture (Trainer.setup_seconds,
    predict's capture) reported apart in ``one_time_setup_s``. ``warm=False``: the single run is the measurement
    (the "e2e-cold" part: a fresh process).
    """
    def run(n_epochs: int) -> dict:
        out: dict = {}
        t_start = time.perf_counter()
        seg = signature_matrices(values, windows=WINDOWS, gap=GAP)  # (S, 3, n, n) float32, NumPy prefix sums
        out["signature_s"] = time.perf_counter() - t_start
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=n, backend=backend, channels=CHANNELS))
        cfg = TrainConfig(epochs=n_epochs, batch_size=batch, device=device.type, bf16=bf16, cuda_graphs=graphs,
                          progress=False)
        trainer = Trainer(net, cfg, steps=STEPS)
        t0 = time.perf_counter()
        history = trainer.fit(seg)  # NumPy in: the host -> device copy of the segments is part of the time
        sync(device)
        out["fit_wall_s"] = time.perf_counter() - t0
        out["train_s"] = out["fit_wall_s"] - trainer.setup_seconds
        out["epoch_s"] = [h["seconds"] for h in history]
        out["epoch_losses"] = [h["train_loss"] for h in history]
        t0 = time.perf_counter()
        timing: dict = {}
        recon = predict(net, seg, batch_size=score_batch, device=device, steps=STEPS, bf16=bf16, cuda_graphs=graphs,
                        timings=timing)
        per_scale, _ = detect.scale_scores(seg[STEPS - 1:], recon, "count", np.full(len(WINDOWS), 0.005), [0])
        score = detect.combine(per_scale, [0], "count")
        out["score_s"] = time.perf_counter() - t0 - timing["setup_s"]
        out["one_time_setup_s"] = trainer.setup_seconds + timing["setup_s"]
        out["windows"] = len(recon)
        out["total_s"] = out["signature_s"] + out["train_s"] + out["score_s"]
        out["wall_s"] = time.perf_counter() - t_start
        out["mean_window_score"] = float(score.mean())
        return out

    if not warm:
        return {**run(epochs), "epochs": epochs, "score_batch": score_batch}
    first = run(1)
    out = run(epochs)
    out.update(epochs=epochs, score_batch=score_batch, first_run_s=first["wall_s"], first_run_epochs=1)
    return out


# ------------------------------------------------------------------------------------------------ per-level ops
def level_ops(device, batch, iters) -> list[dict]:
    """ConvLSTM and attention of each MSCRED level (n = 30) alone, forward + backward, reference vs fused."""
    rows = []
    for C, n in zip(CHANNELS, (30, 15, 8, 4)):
        g = torch.Generator().manual_seed(C)
        x = torch.randn(batch, STEPS, C, n, n, generator=g).to(device)
        w = (torch.randn(4 * C, 2 * C, 2, 2, generator=g) / (2 * (2 * C) ** 0.5)).to(device).requires_grad_()
        b = torch.zeros(4 * C, device=device, requires_grad=True)
        hx = torch.rand(batch, STEPS, C, n, n, generator=g).to(device).requires_grad_()
        for dtype in (torch.float32, torch.bfloat16):
            if dtype == torch.bfloat16 and device.type != "cuda":
                continue
            for op, fns, args in (("convlstm", (reference.convlstm, fused_convlstm.convlstm), (x, w, b, 1.0)),
                                  ("attention", (reference.temporal_attention, fused_attention.temporal_attention),
                                   (hx,))):
                row = {"level_channels": C, "n": n, "op": op, "dtype": str(dtype).split(".")[-1]}
                for name, fn in zip(("reference", "fused"), fns):
                    a = [t.detach().to(dtype).requires_grad_() if torch.is_tensor(t) else t for t in args]
                    for mode in ("fwd", "fwd_bwd"):
                        clock = Clock(device)
                        for i in range(iters + 3):
                            ctx = clock() if i >= 3 else contextlib.nullcontext()
                            with ctx:
                                if mode == "fwd":
                                    with torch.no_grad():
                                        fn(*a)
                                else:
                                    y = fn(*a)
                                    y.backward(torch.ones_like(y))
                        row[f"{name}_{mode}_ms"] = clock.median()
                rows.append(row)
                print(f"level C={C:3d} n={n:2d} {op:9s} {row['dtype']:8s} fwd+bwd ref {row['reference_fwd_bwd_ms']:.3f}"
                      f" ms fused {row['fused_fwd_bwd_ms']:.3f} ms", flush=True)
    return rows


# ------------------------------------------------------------------------------------------------ ceilings, FLOPs
def ceilings(device) -> dict:
    if device.type != "cuda":
        return {}
    out = {}
    a = torch.empty(2 ** 28, dtype=torch.float32, device=device).uniform_()  # 1 GiB
    bcopy = torch.empty_like(a)
    clock = Clock(device)
    for i in range(8):
        with (clock() if i >= 2 else contextlib.nullcontext()):
            bcopy.copy_(a)
    out["copy_TBps"] = 2 * a.numel() * 4 / clock.median() / 1e9
    del a, bcopy
    for name, dtype, tf32 in (("bf16_TFLOPs", torch.bfloat16, False), ("tf32_TFLOPs", torch.float32, True)):
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        m = torch.randn(8192, 8192, device=device).to(dtype)
        clock = Clock(device)
        for i in range(8):
            with (clock() if i >= 2 else contextlib.nullcontext()):
                m @ m
        out[name] = 2 * 8192 ** 3 / clock.median() / 1e9
        torch.backends.cuda.matmul.allow_tf32 = saved
        del m
    return out


def step_flops(n, data, device, batch) -> float:
    """FLOPs of one reference training step (forward + backward), counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    net, _ = build("reference", n, device)
    x = data.batch(torch.arange(batch, device=device) % len(data))
    counter = FlopCounterMode(display=False)
    with counter:
        F.mse_loss(net(x), x[:, -1]).backward()
    return float(counter.get_total_flops())


def forward_flops_per_window(n, data, device, batch) -> float:
    """FLOPs of the reference forward (inference) per window, by FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    net, _ = build("reference", n, device)
    x = data.batch(torch.arange(batch, device=device) % len(data))
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        net(x)
    return float(counter.get_total_flops()) / batch


# Kernel families for the profile summary, first match wins (names as CUPTI reports them).
KERNEL_FAMILIES = (
    # mscred's CUDA C++ ConvLSTM kernels (ops/conv_cell: level 1's training forward and backward steps;
    # ops/resident_lstm: bf16 scoring), before "copy" and the others could claim them (since 2026-12-02 they landed in
    # "other"), and before the Triton cell's "cell_bwd", which conv_cell_bwd_kernel holds (counted as Triton until
    # 2026-12-02's night, results/step_profile_walk/)
    ("CUDA ConvLSTM kernels (conv + cell step, resident)", ("conv_cell_kernel", "conv_cell_bwd_kernel",
                                                            "window_lstm_resident")),
    ("Triton ConvLSTM cell (fwd + bwd)", ("cell_fwd", "cell_bwd")),
    ("Triton attention (fwd + bwd)", ("_attn_",)),
    ("Triton bias + SELU (fwd + bwd)", ("_bias_act",)),
    # Before the cuDNN keys: "_small_conv_wgrad_kernel" holds "wgrad" (until 2026-12-01 it was counted as cuDNN).
    ("Triton small-channel convolutions", ("_small_conv_",)),
    ("Adam", ("adam", "Adam", "FusedOptimizer")),
    ("layout conversions nchw <-> nhwc", ("nchwToNhwc", "nhwcToNchw")),
    ("cuDNN / cuBLAS convolutions and GEMMs", ("xmma", "cudnn", "convolve", "wgrad", "dgrad", "fprop", "gemm",
                                               "cutlass", "sm90_", "sm80_", "implicit_convolve")),
    ("copies, casts, concatenation, gathers", ("copy", "Cat", "index", "_gather_cast", "_transpose_kernel")),
    ("zero fills", ("FillFunctor",)),
    ("reductions", ("reduce_kernel",)),
    ("other elementwise", ("elementwise",)),
)


def is_annotation(key: str) -> bool:
    """Whether a profiler event key is a user annotation such as "Optimizer.step#Adam.step" (it spans kernels that
    are counted already), not a kernel. Kernel names may hold a '#' too -- PyTorch's elementwise kernels are named
    after their lambdas, "...{lambda(int)#1}..." -- so the test is the annotation's whole shape, not the '#'.
    (Until 2026-12-01 every key with a '#' was dropped: the strided copies, fills and adds, ~0.4 ms of the bf16
    training step, were missing from the tables; benchmarks/results/step_ops/.)"""
    return re.fullmatch(r"[\w.]+#[\w.]+", key) is not None


def kernel_events(events, cuda: bool = True) -> tuple[list, str]:
    """(the kernel rows of a profiler's ``key_averages()``, the attribute holding their time): on CUDA the GPU-side
    events (kernels, memcpy, memset) with device time, without the user annotations that span kernels counted
    already; on a CPU the ops by CPU time. profile_train_step.py uses it too."""
    attr = "device_time_total" if cuda else "cpu_time_total"
    return [e for e in events if getattr(e, attr, 0) > 0 and (not cuda or e.device_type.name == "CUDA")
            and not getattr(e, "is_user_annotation", False) and not is_annotation(e.key)], attr


def family_totals(rows) -> dict:
    """{family: summed value} of (kernel name, value) rows, largest first (``kernel_family``)."""
    families: dict = {}
    for name, value in rows:
        fam = kernel_family(name)
        families[fam] = families.get(fam, 0.0) + value
    return dict(sorted(families.items(), key=lambda kv: -kv[1]))


def kernel_family(name: str) -> str:
    for family, keys in KERNEL_FAMILIES:
        if any(k in name for k in keys):
            return family
    return "other"


def profile_step(step, data, device, batch, path: Path, title: str) -> dict:
    """torch.profiler over 5 steps: GPU time per kernel (name, calls, total, share) and per kernel family, written
    to ``path``; returns {"kernels": top rows, "families": {family: us per step}, "total_us_per_step": ...}."""
    from torch.profiler import ProfilerActivity, profile

    idx = torch.randperm(len(data), device=device)[:batch]
    step(idx)
    sync(device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(5):
            step(idx)
        sync(device)
    kernels, attr = kernel_events(prof.key_averages(), device.type == "cuda")
    total = sum(getattr(e, attr) for e in kernels) or 1.0
    kernels.sort(key=lambda e: -getattr(e, attr))
    rows = [{"kernel": e.key[:110], "calls_per_step": e.count / 5, "us_per_step": getattr(e, attr) / 5,
             "share": getattr(e, attr) / total} for e in kernels[:40]]
    families = family_totals(((e.key, getattr(e, attr) / 5) for e in kernels))
    with open(path, "a") as fh:
        fh.write(f"\n## {title}: GPU time per kernel, per step (5 profiled steps), total {total / 5 / 1e3:.3f} ms, "
                 f"{sum(e.count for e in kernels) / 5:g} kernels per step\n")
        for fam, us in families.items():
            fh.write(f"{us:10.1f} us {100 * us / (total / 5):5.1f}%  [{fam}]\n")
        fh.write("\n")
        for r in rows:
            fh.write(f"{r['us_per_step']:10.1f} us {100 * r['share']:5.1f}%  x{r['calls_per_step']:<5g} {r['kernel']}\n")
    return {"kernels": rows, "families": families, "total_us_per_step": total / 5,
            "kernels_per_step": sum(e.count for e in kernels) / 5}


# ------------------------------------------------------------------------------------------------ main
# Which part (process) runs what. "eager" holds no CUDA graph. Every graphed variant runs in a fresh process of its
# own, where at most one graph is alive at any time (the training step's is released before any inference graph
# is captured, and each inference batch size's before the next): on the H200 (2026-11-29) a process holding three
# live training graphs died with SIGSEGV in CUDAGraph.replay, twice, at whichever graphed variant came third;
# with one or two live graphs per process every run was clean.
# The graphed variants autotune cuDNN's convolution algorithms in their warm-up (GraphedStep's default, the
# product's: cudnn.benchmark); the eager rows keep PyTorch's default heuristics, and two ablation rows show what the
# flag alone does: "reference eager, cudnn.benchmark" and the fused graphed bf16 step with heuristics.
TRAIN_VARIANTS = {  # name: (backend, graphs, bf16, torch.compile, fused Adam, cudnn.benchmark, part)
    "reference eager": ("reference", False, False, False, True, False, "eager"),
    "reference eager, foreach Adam (PyTorch's default)": ("reference", False, False, False, False, False, "eager"),
    "fused eager": ("fused", False, False, False, True, False, "eager"),
    "fused eager + bf16": ("fused", False, True, False, True, False, "eager"),
    "reference eager, cudnn.benchmark": ("reference", False, False, False, True, True, "eager"),
    "fused + CUDA graph + bf16": ("fused", True, True, False, True, True, "g-fused-bf16"),
    "fused + CUDA graph": ("fused", True, False, False, True, True, "g-fused"),
    "reference + CUDA graph + bf16": ("reference", True, True, False, True, True, "g-ref-bf16"),
    "reference + CUDA graph": ("reference", True, False, False, True, True, "g-ref"),
    "fused + CUDA graph + bf16, cuDNN heuristics": ("fused", True, True, False, True, False, "g-fused-bf16-heur"),
    "torch.compile(reference)": ("reference", False, False, True, True, False, "compile"),
}
INFER_VARIANTS = {  # name: (backend, graphs, bf16, part)
    "reference eager": ("reference", False, False, "eager"),
    "fused eager": ("fused", False, False, "eager"),
    "reference + CUDA graph + bf16": ("reference", True, True, "g-ref-bf16"),
    "fused + CUDA graph": ("fused", True, False, "g-fused"),
    "fused + CUDA graph + bf16": ("fused", True, True, "g-fused-bf16"),
}
# Scoring consecutive windows with shared segments (MSCREDNet.forward_windows: the encoder and the fused
# ConvLSTM's input convolutions once per segment): eager, as ``predict`` runs without graphs, and from one CUDA graph
# (train_graphs.GraphedWindowInference, predict's graphed scoring). name: (backend, graphs, bf16, part).
SHARED_INFER_VARIANTS = {
    "fused eager + bf16, shared segments": ("fused", False, True, "g-fused-bf16"),
    "fused + CUDA graph + bf16, shared segments": ("fused", True, True, "g-fused-bf16"),
}
E2E_VARIANTS = {  # name: (backend, graphs, bf16, part)
    "reference eager": ("reference", False, False, "eager"),
    "fused + CUDA graph + bf16": ("fused", True, True, "g-fused-bf16"),
}
# The graphed parts, most important first (the headline variant before its ablations), with the share of the
# budget each may use at most. "compile" runs beside them all (see main).
GRAPH_PARTS = ("g-fused-bf16", "g-fused", "g-ref-bf16", "g-ref", "e2e-cold", "g-fused-bf16-heur")
# These are caps (a part ends when its items are done; on the H200 a graphed part takes ~10-20 s, the eager part
# ~40 s), there so that one hung part cannot take the others' time.
PART_SHARES = {"eager": 0.4, "g-fused-bf16": 0.3, "g-fused": 0.2, "g-ref-bf16": 0.2, "g-ref": 0.2, "e2e-cold": 0.15,
               "g-fused-bf16-heur": 0.1}
ALL_PARTS = ("eager", *GRAPH_PARTS, "compile")
EAGER_PROFILES = ("fused eager + bf16", "reference eager")  # profiled at the end of the eager part
SCORING_PROFILE = "fused eager + bf16, scoring all {windows} windows with shared segments (per call, not per step)"
GPU_FREE_FLAG = "gpu_free"  # written into --work when the other parts are done: compile may time


def _wait_for_gpu(work: Path, deadline: float) -> None:
    """The compile part compiles while the other parts time; it times only once they are done (or at deadline)."""
    while not (work / GPU_FREE_FLAG).exists() and time.perf_counter() < deadline:
        time.sleep(0.2)


def _release(device) -> None:
    """Drop freed graphs' memory pools now (a graph is destroyed when its last reference goes)."""
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _e2e_cold(args, work: Path, path: Path, n: int, T_series: int, batch: int) -> None:
    """The end-to-end workload once, fused + CUDA graph + bf16, in this fresh process, timed from before
    ``import torch`` to the scores of every window: what a user's first ``mscred train`` + scoring costs."""
    device = torch.device("cuda")
    score_batch = 1024
    graphed = work / "train_g-fused-bf16.json"
    if graphed.exists():  # the best inference batch that part measured
        rows = [t for t in json.loads(graphed.read_text()).get("inference", [])]
        if rows:
            score_batch = max(rows, key=lambda t: t["windows_per_s"])["batch"]
    t0 = time.perf_counter()
    values = thesis_series(T_series, n)
    row = {"variant": "fused + CUDA graph + bf16, fresh process",
           **end_to_end(values, n, device, "fused", True, True, epochs=5, batch=batch, score_batch=score_batch,
                        warm=False)}
    row["imports_s"] = t0 - T_IMPORT
    row["process_to_scores_s"] = time.perf_counter() - T_IMPORT
    print("e2e cold: " + json.dumps({k: v for k, v in row.items() if k != "epoch_losses"}), flush=True)
    path.write_text(json.dumps({"errors": {}, "end_to_end_cold": [row], "elapsed_s": row["process_to_scores_s"]},
                               indent=1))


def run_part(part: str, args, work: Path) -> None:
    """One part of the benchmark in this process; results saved to work/train_<part>.json after every item."""
    global CHANNELS
    t_begin = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.type == "cuda"
    n, T_series, batch = (8, 1200, 8) if args.quick else (30, 36_000, 128)
    if args.quick:
        CHANNELS = (4, 6, 8, 8)
    iters = 3 if args.quick else args.iters
    result: dict = {"errors": {}, "train_step": [], "inference": [], "end_to_end": []}
    path = work / f"train_{part}.json"
    if part == "e2e-cold":
        _e2e_cold(args, work, path, n, T_series, batch)
        return

    def save():
        result["elapsed_s"] = time.perf_counter() - t_begin
        path.write_text(json.dumps(result, indent=1))

    def attempt(key, fn):
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - a failure is recorded; the next item still runs
            result["errors"][key] = f"{type(err).__name__}: {err}"[:400]
            print(f"{key}: FAILED {result['errors'][key]}", flush=True)
        finally:
            save()

    values = thesis_series(T_series, n)
    data = WindowDataset(torch.from_numpy(signature_matrices(values, windows=WINDOWS, gap=GAP)).to(device), STEPS)
    result["windows"], result["batch"] = len(data), batch
    result["meta"] = {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "triton": __import__("triton").__version__, "python": sys.version.split()[0],
        "tf32_convolutions": torch.backends.cudnn.allow_tf32, "quick": args.quick,
        "command": "PYTHONPATH=src python3 benchmarks/bench_train.py" + (" --quick" if args.quick else ""),
        "workload": f"{T_series} steps x {n} sensors, windows {WINDOWS}, gap {GAP}, {STEPS} steps per window, "
                    f"batch {batch}, channels {CHANNELS}"}

    if part == "eager":
        result["ceilings"] = attempt("ceilings", lambda: ceilings(device))
        print("ceilings", result["ceilings"], flush=True)
        result["validation"] = attempt("validation", lambda: validate(data, n, device, batch))

    profile_path = work / f"train_profile_{part}.txt"
    steps = {}
    for name, (backend, graphs, bf16, comp, fused_adam, autotune, vpart) in TRAIN_VARIANTS.items():
        if vpart != part or ((graphs or bf16 or comp or autotune) and not cuda):
            continue

        def one(name=name, backend=backend, graphs=graphs, bf16=bf16, comp=comp, fused_adam=fused_adam,
                autotune=autotune):
            ready = (lambda: _wait_for_gpu(work, t_begin + args.compile_wait_s)) if comp else None
            step, setup_s = make_step(backend, n, data, device, batch, graphs, bf16, comp, fused_adam, autotune)
            if graphs and autotune:
                # GraphedStep scopes its autotuning to warm-up + capture since 2026-11-30; before, it left the flag
                # on for the rest of the process, and the part's later rows (inference, end to end) were measured
                # so. Kept, so that the records stay comparable.
                torch.backends.cudnn.benchmark = True
            ms, first_s, loss, first_loss = time_train(step, data, device, batch, iters, ready=ready)
            if name in EAGER_PROFILES:
                steps[name] = step  # kept for the eager profiles below; every other step is released at once
            row = {"variant": name, "bf16": bf16, "step_ms": ms, "windows_per_s": batch / ms * 1e3,
                   "one_time_s": setup_s + (first_s if (comp or not graphs) else 0.0), "loss_after": loss,
                   "first_loss": first_loss, "cudnn_benchmark": autotune}
            result["train_step"].append(row)
            print(f"train {name:52s} {ms:8.3f} ms/step {row['windows_per_s']:9.0f} windows/s "
                  f"(one-time {row['one_time_s']:.1f} s, first loss {first_loss:.6f})", flush=True)
        attempt("train " + name, one)
        if cuda and not graphs:
            torch.backends.cudnn.benchmark = False  # the eager rows after an autotuned one stay on heuristics
        _release(device)

    if part == "eager":
        def flop_floor():
            flops = step_flops(n, data, device, batch)
            fwd = forward_flops_per_window(n, data, device, batch)
            ceil = result.get("ceilings") or {}
            return {"reference_step_flops": flops, "forward_flops_per_window": fwd,
                    "floor_ms_tf32": flops / (ceil["tf32_TFLOPs"] * 1e9) if ceil else None,
                    "floor_ms_bf16": flops / (ceil["bf16_TFLOPs"] * 1e9) if ceil else None}
        result["flops"] = attempt("flops", flop_floor)
        print("flops", result["flops"], flush=True)

    # Inference before end to end: the end-to-end scoring uses this variant's best batch.
    batches = (8, 16) if args.quick else (256, 1024, len(data))
    best_batch: dict = {}
    for name, (backend, graphs, bf16, vpart) in INFER_VARIANTS.items():
        if vpart != part or ((graphs or bf16) and not cuda):
            continue
        for b in batches:
            def one(name=name, backend=backend, graphs=graphs, bf16=bf16, b=b):
                ms, wps, setup = time_inference(backend, n, data, device, b, graphs, bf16, max(iters // 3, 3))
                result["inference"].append({"variant": name, "batch": b, "ms": ms, "windows_per_s": wps,
                                            "one_time_s": setup})
                if wps > best_batch.get(name, (0, 0))[1]:
                    best_batch[name] = (b, wps)
                print(f"infer {name:34s} batch {b:5d}: {wps:10.0f} windows/s", flush=True)
            attempt(f"inference {name} {b}", one)
            _release(device)

    for name, (backend, graphs, bf16, vpart) in E2E_VARIANTS.items():
        if vpart != part or ((graphs or bf16) and not cuda):
            continue

        def one(name=name, backend=backend, graphs=graphs, bf16=bf16):
            score_batch = best_batch.get(name, (16 if args.quick else 1024, 0))[0]
            row = {"variant": name, **end_to_end(values, n, device, backend, graphs, bf16,
                                                 epochs=1 if args.quick else 5, batch=batch,
                                                 score_batch=score_batch)}
            result["end_to_end"].append(row)
            print(f"e2e {name}: " + json.dumps({k: v for k, v in row.items() if k != 'epoch_losses'}), flush=True)
        attempt("e2e " + name, one)
        _release(device)

    # After the end to end (the headline): if the part's time cap falls here, these rows are what is lost.
    for name, (backend, graphs, bf16, vpart) in SHARED_INFER_VARIANTS.items():
        if vpart != part or ((graphs or bf16) and not cuda):
            continue
        for b in batches:
            def one(name=name, backend=backend, graphs=graphs, bf16=bf16, b=b):
                ms, wps, setup = time_inference_shared(backend, n, data, device, b, graphs, bf16,
                                                       max(iters // 3, 3))
                result["inference"].append({"variant": name, "batch": min(b, len(data)), "ms": ms,
                                            "windows_per_s": wps, "one_time_s": setup})
                print(f"infer {name:34s} batch {b:5d}: {wps:10.0f} windows/s", flush=True)
            attempt(f"inference {name} {b}", one)
            _release(device)

    if part == "eager" and args.level_ops:
        result["level_ops"] = attempt("level_ops", lambda: level_ops(device, batch, 5))
    if part == "eager":
        profile_path.write_text(f"# bench_train.py profile ({part}), {dt.datetime.now(dt.timezone.utc).isoformat()}\n")
        result["profile"] = {}
        for name in EAGER_PROFILES:
            if name in steps:
                result["profile"][name] = attempt(
                    "profile " + name, lambda name=name: profile_step(steps[name], data, device, batch,
                                                                      profile_path, name))
        # Where graphed bf16 scoring's time goes: the same kernels, launched eagerly.
        title = SCORING_PROFILE.format(windows=len(data))
        result["profile"][title] = attempt("profile scoring", lambda: profile_scoring(n, data, device, batch,
                                                                                      profile_path, title))
    if part == "g-fused-bf16" and cuda and not args.no_graph_profile:
        # Last in its process: whether CUPTI sees the kernels of a graph replay depends on the versions, and a
        # profiler fault here must not cost the rows above (they are saved already).
        profile_path.write_text(f"# bench_train.py profile ({part}), {dt.datetime.now(dt.timezone.utc).isoformat()}\n")
        result["profile"] = {}

        def graphed_profile():
            step, _ = make_step("fused", n, data, device, batch, True, True)
            rows = profile_step(step, data, device, batch, profile_path, "fused + CUDA graph + bf16 (graph replays)")
            if not rows:
                with open(profile_path, "a") as fh:
                    fh.write("(torch.profiler recorded no kernel inside the graph replays here)\n")
            return rows
        result["profile"]["fused + CUDA graph + bf16 (graph replays)"] = attempt("profile graphed", graphed_profile)
    save()


def merge(work: Path, out_dir: Path, parts=ALL_PARTS) -> dict:
    """Join the parts' JSON into one result with speedups against the reference eager rows."""
    result: dict = {"errors": {}, "train_step": [], "inference": [], "end_to_end": [], "parts": {}}
    for part in parts:
        path = work / f"train_{part}.json"
        if not path.exists():
            result["errors"][part] = ("part produced no result (crashed, or stopped at its time limit / the budget "
                                      "before its first item finished; see the log)")
            continue
        r = json.loads(path.read_text())
        result["parts"][part] = {"elapsed_s": r.get("elapsed_s")}
        for key in ("train_step", "inference", "end_to_end", "end_to_end_cold"):
            result.setdefault(key, [])
            result[key] += r.get(key, [])
        result["errors"].update({f"{part}: {k}": v for k, v in r.get("errors", {}).items()})
        for key in ("meta", "windows", "batch", "ceilings", "validation", "flops", "level_ops"):
            if key in r and key not in result:
                result[key] = r[key]
        result.setdefault("profile", {}).update(r.get("profile") or {})
    order = list(TRAIN_VARIANTS)
    result["train_step"].sort(key=lambda t: order.index(t["variant"]) if t["variant"] in order else len(order))
    iorder = list(INFER_VARIANTS)
    result["inference"].sort(key=lambda t: (iorder.index(t["variant"]) if t["variant"] in iorder else 99, t["batch"]))
    ref = next((t for t in result["train_step"] if t["variant"] == "reference eager"), None)
    for t in result["train_step"]:
        if ref:
            t["speedup_vs_eager"] = ref["step_ms"] / t["step_ms"]
            # Correctness before speed: every variant starts from the same weights, so its first step's loss (the
            # initial weights on batch 0) must equal the reference eager's, to TF32 / bf16 rounding.
            tol = 2e-2 if t.get("bf16") else 2e-3
            t["first_loss_rel_err"] = abs(t["first_loss"] - ref["first_loss"]) / abs(ref["first_loss"])
            t["check_ok"] = bool(t["first_loss_rel_err"] < tol)
    best: dict = {}
    for t in result["inference"]:
        if t["windows_per_s"] > best.get(t["variant"], {}).get("windows_per_s", 0):
            best[t["variant"]] = t
    for t in best.values():
        t["best"] = True
    ibase = best.get("reference eager", {}).get("windows_per_s")
    for t in result["inference"]:
        if ibase:
            t["speedup_vs_eager_best"] = t["windows_per_s"] / ibase
    fl, c = result.get("flops") or {}, result.get("ceilings") or {}
    if ibase and fl.get("forward_flops_per_window") and c.get("bf16_TFLOPs"):
        # What 10x the eager inference would take: the forward's arithmetic at 10x the windows/s, as a fraction of
        # the measured bf16 matrix rate (a dense GEMM's best case; these small convolutions reach far less).
        need = 10 * ibase * fl["forward_flops_per_window"] / 1e12
        fl["inference_10x_TFLOPs"] = need
        fl["inference_10x_share_of_bf16_peak"] = need / c["bf16_TFLOPs"]
        fl["inference_ceiling_windows_per_s_bf16"] = c["bf16_TFLOPs"] * 1e12 / fl["forward_flops_per_window"]
    e2e_ref = next((t for t in result["end_to_end"] if t["variant"] == "reference eager"), None)
    for t in result["end_to_end"]:
        if e2e_ref:
            t["speedup_vs_eager"] = e2e_ref["total_s"] / t["total_s"]
    (out_dir / "train.json").write_text(json.dumps(result, indent=1))
    (out_dir / "train.md").write_text(markdown(result))
    profiles = [work / f"train_profile_{part}.txt" for part in ALL_PARTS]
    text = "".join(p.read_text() for p in profiles if p.exists())
    if text:
        (out_dir / "train_profile.txt").write_text(text)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--work", default=None, help="folder for the parts' JSON (default: a temporary folder)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CPU smoke test of the script)")
    ap.add_argument("--part", choices=("all", *ALL_PARTS), default="all")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="wall-clock budget of the whole run (default 400 s: ~150 s on a warm H200, more on a fresh "
                         "machine that compiles every kernel; 900 s with --quick, for a busy CPU)")
    ap.add_argument("--iters", type=int, default=20, help="timed training steps per variant")
    ap.add_argument("--level-ops", action="store_true", help="also time each level's ConvLSTM/attention alone")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant (saves its CPU time)")
    ap.add_argument("--no-graph-profile", action="store_true", help="skip the profile of the graphed step")
    ap.add_argument("--only", default=None,
                    help="comma-separated parts to run (default: all), e.g. eager,g-fused-bf16,g-fused,e2e-cold")
    ap.add_argument("--compile-wait-s", type=float, default=1e9, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.budget_s is None:
        # The parts end when their items are done; the budget only caps a hung part. At 150 s a fresh H200 (every
        # Triton kernel compiled in the eager part, torch.compile beside it) cut the eager part -- the baseline --
        # at its 60 s share before its first row (results/train_final_1202n/).
        args.budget_s = 900.0 if args.quick else 400.0
    only = set(args.only.split(",")) if args.only else set(ALL_PARTS)
    if only - set(ALL_PARTS):
        ap.error(f"--only: unknown parts {sorted(only - set(ALL_PARTS))} (choose from {', '.join(ALL_PARTS)})")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or f"/tmp/bench_train_{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    if args.part != "all":
        if hasattr(os, "sched_setaffinity"):
            # Inductor compiles on the second half of the cores, so that the other parts' launch-bound timings
            # (on the first half) are not slowed by it: that would flatter every speedup against eager.
            cores = sorted(os.sched_getaffinity(0))
            if len(cores) >= 4:
                os.sched_setaffinity(0, cores[len(cores) // 2:] if args.part == "compile" else cores[:len(cores) // 2])
        run_part(args.part, args, work)
        return
    # Each part in its own process: a device-side assert poisons a CUDA context, a crash loses only its part, and
    # no process holds more than one live CUDA graph (see TRAIN_VARIANTS). torch.compile starts at once, in
    # parallel: it compiles (CPU) while the other parts time, and times only after they are done (the flag file),
    # with whatever budget is left.
    t0 = time.perf_counter()
    for stale in work.glob("train_*.json"):
        stale.unlink()
    (work / GPU_FREE_FLAG).unlink(missing_ok=True)
    # -X faulthandler: a part that dies of a signal prints the Python stack where it died.
    base = [sys.executable, "-X", "faulthandler", __file__, "--out", str(out_dir), "--work", str(work), "--iters",
            str(args.iters)]
    base += ((["--quick"] if args.quick else []) + (["--level-ops"] if args.level_ops else [])
             + (["--no-graph-profile"] if args.no_graph_profile else []))
    compile_proc = None
    if torch.cuda.is_available() and not args.no_compile and "compile" in only:
        env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, (os.cpu_count() or 2) // 2))}
        compile_proc = subprocess.Popen(base + ["--part", "compile", "--compile-wait-s",
                                                str(args.budget_s - 15)], env=env)
    for part in ("eager", *GRAPH_PARTS):
        if (part != "eager" and not torch.cuda.is_available()) or part not in only:
            continue
        left = args.budget_s - (time.perf_counter() - t0)
        # On a CPU only the eager part runs: it may use the whole budget.
        limit = min(left, PART_SHARES[part] * args.budget_s) if torch.cuda.is_available() else left
        if limit < 8:
            print(f"part {part}: skipped, {left:.0f} s left", flush=True)
            continue
        t_part = time.perf_counter()
        try:
            rc = subprocess.run(base + ["--part", part], timeout=limit, check=False).returncode
            if rc != 0:
                print(f"part {part}: exit status {rc} (its saved results are kept)", flush=True)
        except subprocess.TimeoutExpired:
            print(f"part {part}: stopped after {limit:.0f} s (its saved results are kept)", flush=True)
        print(f"part {part}: {time.perf_counter() - t_part:.1f} s", flush=True)
    (work / GPU_FREE_FLAG).write_text("done")
    if compile_proc is not None:
        left = max(args.budget_s - (time.perf_counter() - t0), 1.0)
        try:
            rc = compile_proc.wait(timeout=left)
            if rc != 0:
                print(f"part compile: exit status {rc} (its saved results are kept)", flush=True)
        except subprocess.TimeoutExpired:
            compile_proc.kill()
            compile_proc.wait()
            print(f"part compile: stopped at the budget ({args.budget_s:.0f} s; its saved results are kept)",
                  flush=True)
    parts = (tuple(p for p in ALL_PARTS if p in only and not (p == "compile" and args.no_compile))
             if torch.cuda.is_available() else ("eager",))
    print(markdown(merge(work, out_dir, parts)), flush=True)


def markdown(r: dict) -> str:
    m = r.get("meta") or {}
    lines = ["# Training / inference speed (bench_train.py)", "",
             f"{m.get('gpu')}, torch {m.get('torch')}, CUDA {m.get('cuda')}, cuDNN {m.get('cudnn')}, Triton "
             f"{m.get('triton')}, {m.get('date_utc')}; TF32 convolutions: {m.get('tf32_convolutions')}. Workload: "
             f"{m.get('workload')} ({r.get('windows')} windows). Command: `{m.get('command')}`. Times: CUDA-event "
             f"medians after warm-up; one-time = warm-up + capture / compilation.", ""]
    c = r.get("ceilings") or {}
    if c:
        lines += [f"Measured ceilings: copy {c['copy_TBps']:.2f} TB/s, bf16 matmul {c['bf16_TFLOPs']:.0f} TFLOP/s, "
                  f"TF32 matmul {c['tf32_TFLOPs']:.0f} TFLOP/s.", ""]
    lines += ["## Correctness (whole model, fused vs reference, one batch, same weights)", "",
              "| precision | loss rel. err | worst grad rel. err | ok |", "| --- | --- | --- | --- |"]
    for k, v in (r.get("validation") or {}).items():
        lines.append(f"| {k} | {v['loss_rel_err']:.1e} | {v['grad_worst_rel_err']:.1e} ({v['grad_worst_param']}) | "
                     f"{v['ok']} |")
    fl = r.get("flops") or {}
    lines += ["", f"## Training step, batch {r.get('batch', 128)}", ""]
    if fl:
        lines += [f"Arithmetic of one step (FlopCounterMode on the reference): {fl['reference_step_flops'] / 1e12:.3f}"
                  f" TFLOP" + (f"; floor {fl['floor_ms_tf32']:.2f} ms at the measured TF32 rate, "
                               f"{fl['floor_ms_bf16']:.2f} ms at the bf16 rate." if fl.get("floor_ms_tf32") else "."), ""]
    lines += ["Every variant runs the Trainer's own step objects (`mscred.train_graphs.EagerStep` / `GraphedStep`), "
              "fused Adam unless marked; 'vs eager' divides by the reference eager row with fused Adam (the faster, "
              "conservative baseline). check: the first step's loss (same initial weights, same batch) equals "
              "the reference eager's (rel. err < 2e-3 fp32 / TF32, 2e-2 bf16). The graphed rows let cuDNN time its "
              "convolution algorithms in their warm-up (cudnn.benchmark, GraphedStep's default); the eager rows use "
              "PyTorch's default heuristics; two ablation rows show the flag alone.", "",
              "| variant | ms / step | windows / s | vs eager | one-time (s) | check (first-loss rel. err) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for t in r.get("train_step") or []:
        check = (f"{'ok' if t['check_ok'] else 'WRONG'} ({t['first_loss_rel_err']:.1e})"
                 if "check_ok" in t else "-")
        lines.append(f"| {t['variant']} | {t['step_ms']:.2f} | {t['windows_per_s']:,.0f} | "
                     f"{t.get('speedup_vs_eager', float('nan')):.2f}x | {t['one_time_s']:.1f} | {check} |")
    timed = {t["variant"] for t in r.get("train_step") or []}
    for key, err in (r.get("errors") or {}).items():
        name = key.split("train ", 1)[-1] if "train " in key else None
        if name in TRAIN_VARIANTS and name not in timed:
            lines.append(f"| {name} | FAILED: {err.splitlines()[0][:120] if err else err} | | | | |")
    if "compile" in (r.get("errors") or {}) and "torch.compile(reference)" not in timed:
        lines.append(f"| torch.compile(reference) | FAILED: {r['errors']['compile']} | | | | |")
    lines += ["", "## Inference (windows / s at batch 256 / 1024 / all windows; best in bold; graphed variants "
              "replay one CUDA graph per batch)", "",
              "| variant | batch | windows / s | vs best eager |", "| --- | --- | --- | --- |"]
    for t in r.get("inference") or []:
        wps = f"{t['windows_per_s']:,.0f}"
        lines.append(f"| {t['variant']} | {t['batch']} | {'**' + wps + '**' if t.get('best') else wps} | "
                     f"{t.get('speedup_vs_eager_best', float('nan')):.2f}x |")
    if fl.get("inference_10x_TFLOPs"):
        lines += ["", f"Inference arithmetic: {fl['forward_flops_per_window'] / 1e9:.2f} GFLOP per window (reference "
                  f"forward, FlopCounterMode). 10x the best eager inference would need "
                  f"{fl['inference_10x_TFLOPs']:.0f} TFLOP/s, {100 * fl['inference_10x_share_of_bf16_peak']:.0f}% of "
                  f"the measured bf16 matrix rate; at 100% of it the ceiling is "
                  f"{fl['inference_ceiling_windows_per_s_bf16']:,.0f} windows/s."]
    lines += ["", "## End to end: signature matrices + 5 epochs + scoring every window", "",
              "The product path: NumPy signature matrices, `Trainer.fit` with the variant's config flags (segments "
              "copied to the device inside fit), `predict` of every window at the variant's best inference batch "
              "and the count score (`detect.scale_scores`). Measured on a second run in the same process (after "
              "its step and inference timings); the first run (1 epoch) is reported beside it. One-time = graph "
              "warm-up + capture of the measured run (training step and inference batch).", "",
              f"| variant | signature (s) | {(r.get('end_to_end') or [{}])[0].get('epochs', 5)} epochs (s) | scoring (s) "
              "| **total (s)** | vs eager | one-time capture (s) "
              "| first run in the process, 1 epoch (s) | score batch |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in r.get("end_to_end") or []:
        lines.append(f"| {t['variant']} | {t['signature_s']:.3f} | {t['train_s']:.3f} | {t['score_s']:.3f} | "
                     f"**{t['total_s']:.3f}** | {t.get('speedup_vs_eager', float('nan')):.2f}x | "
                     f"{t['one_time_setup_s']:.2f} | {t.get('first_run_s', float('nan')):.2f} | "
                     f"{t.get('score_batch', '-')} |")
    for t in r.get("end_to_end_cold") or []:
        lines += ["", f"{t['variant']}: {t['process_to_scores_s']:.2f} s from the start of the Python process "
                  f"(before `import torch`) to the scores of every window: imports {t['imports_s']:.2f} s, signature "
                  f"{t['signature_s']:.3f} s, Trainer.fit {t['fit_wall_s']:.2f} s (CUDA context, cuDNN/cuBLAS, Triton "
                  f"kernels from the on-disk cache, graph capture, 5 epochs), scoring {t['score_s']:.3f} s + its "
                  f"graph capture; one-time graph warm-up + capture in all {t['one_time_setup_s']:.2f} s."]
    if r.get("parts"):
        lines += ["", "Parts (one process each): " + ", ".join(f"{k} {v['elapsed_s']:.0f} s" for k, v in
                                                                r["parts"].items() if v.get("elapsed_s")) + "."]
    if r.get("level_ops"):
        lines += ["", "## Per level, one op alone, batch 128 (ms; forward without autograd / forward+backward)", "",
                  "| level (C, n) | op | dtype | reference fwd | fused fwd | reference fwd+bwd | fused fwd+bwd |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for t in r["level_ops"]:
            lines.append(f"| {t['level_channels']}, {t['n']} | {t['op']} | {t['dtype']} | {t['reference_fwd_ms']:.3f} |"
                         f" {t['fused_fwd_ms']:.3f} | {t['reference_fwd_bwd_ms']:.3f} | {t['fused_fwd_bwd_ms']:.3f} |")
    for title, prof in (r.get("profile") or {}).items():
        if not prof:
            continue
        rows = prof.get("kernels", []) if isinstance(prof, dict) else prof
        lines += ["", f"## Profile: {title} (GPU us per step)", ""]
        if isinstance(prof, dict) and prof.get("families"):
            total = prof["total_us_per_step"]
            lines += [f"Total {total / 1e3:.3f} ms of kernels per step ({prof['kernels_per_step']:g} launches). By "
                      "family: " + "; ".join(f"{fam} {us:.0f} us ({100 * us / total:.0f}%)"
                                             for fam, us in prof["families"].items()) + ".", ""]
        lines += ["| us | share | calls | kernel |", "| --- | --- | --- | --- |"]
        for k in rows[:15]:
            lines.append(f"| {k['us_per_step']:.0f} | {100 * k['share']:.1f}% | {k['calls_per_step']:g} | "
                         f"`{k['kernel'][:80]}` |")
    if r.get("errors"):
        lines += ["", "## Errors", ""] + [f"- {k}: {v.splitlines()[0] if v else v}" for k, v in r["errors"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
