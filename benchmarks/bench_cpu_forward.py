"""The CPU scoring forward (``MSCREDNet.forward_windows`` of the reference backend under no_grad, as ``mscred
detect`` runs it through ``predict``): the reference ops against ``ops/cpu_inference.py``'s chunked path, and its
levers (chunk size, layout, threads), in alternation.

For each sensor count a network of the default configuration (``--model-dir``: a trained one, e.g. from
bench_cpu_detect.py's work folder; else freshly initialised with ``--seed``) scores ``--windows`` consecutive
windows of random signature matrices in batches of ``detector.inference_batch`` windows, as ``predict`` does. Each
variant is first checked against the reference ops (max abs difference / max abs value, float32; and both against
the float64 reference ops), then every repeat times every variant once, in an order rotated per repeat; each
variant is warmed up with one batch first (oneDNN's primitive set-up). Wall seconds and process CPU seconds.

Variants: ``reference`` (MSCRED_CPU_CHUNKED=0: the reference ops as before), ``chunked`` (the default:
``MSCREDNet.forward_windows``), ``chunked,chunk=K,workers=W,nchw`` (``cpu_inference.forward_windows`` with K
windows per chunk, W worker threads, NCHW; each option optional), ``exact_tanh`` (the chunked path with ATen's
tanh in the cell, MSCRED_CPU_EXACT_TANH=1), ``bf16`` (the reference ops under CPU bf16 autocast, what a model trained
with --bf16 scored with), ``compile`` (torch.compile of the reference
forward_windows, inductor; its compile time is the first call's). A suffix ``@T`` runs the variant with T torch
threads (``torch.set_num_threads``).

Usage::

    PYTHONPATH=src python benchmarks/bench_cpu_forward.py --sizes 30 80 --windows 128 --repeats 5 \\
        --variants reference chunked --out benchmarks/results/cpu_forward/run.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager

import torch


@contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _net(n: int, model_dir: str | None, seed: int):
    from mscred.config import ModelConfig
    from mscred.detector import MSCRED
    from mscred.model import MSCREDNet

    if model_dir:
        path = model_dir.format(n=n)
        return MSCRED.load(path, device="cpu").net_.eval(), path
    torch.manual_seed(seed)
    return MSCREDNet(ModelConfig(n_sensors=n, backend="reference")).eval(), "fresh init"


def _runner(net, variant: str, compiled: dict):
    """A function segments -> reconstructions for ``variant``; ``variant@T``: with T torch threads."""
    if "@" in variant:
        name, threads = variant.split("@")
        inner = _runner(net, name, compiled)

        def with_threads(seg):
            before = torch.get_num_threads()
            torch.set_num_threads(int(threads))
            try:
                return inner(seg)
            finally:
                torch.set_num_threads(before)
        return with_threads
    from mscred.ops import cpu_inference

    if variant == "reference":
        def run(seg):
            with _env("MSCRED_CPU_CHUNKED", "0"):
                return net.forward_windows(seg, 5)
        return run
    if variant == "chunked":
        return lambda seg: net.forward_windows(seg, 5)
    if variant == "bf16":  # what a model trained with --bf16 scored with on a CPU with native bf16: autocast
        def bf16(seg):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return net.forward_windows(seg, 5).float()
        return bf16
    if variant == "exact_tanh":  # the chunked path with ATen's tanh in the cell (MSCRED_CPU_EXACT_TANH=1)
        def exact(seg):
            with _env("MSCRED_CPU_EXACT_TANH", "1"):
                return net.forward_windows(seg, 5)
        return exact
    if variant.startswith("chunked,"):  # chunked,chunk=K,workers=W,nchw
        opts = {}
        for item in variant.split(",")[1:]:
            key, _, value = item.partition("=")
            opts[key] = value
        kw = {"chunk": int(opts.get("chunk", 0)) or None, "workers": int(opts.get("workers", 0)) or None}
        if "nchw" in opts:
            kw["fmt"] = torch.contiguous_format
        return lambda seg: cpu_inference.forward_windows(net, seg, 5, **kw)
    if variant == "compile":
        if "fn" not in compiled:
            with _env("MSCRED_CPU_CHUNKED", "0"):
                compiled["fn"] = torch.compile(net.forward_windows)

        def run(seg):
            with _env("MSCRED_CPU_CHUNKED", "0"):
                return compiled["fn"](seg, 5)
        return run
    raise SystemExit(f"unknown variant {variant!r}")


def _forward(run, segments: torch.Tensor, batch: int) -> torch.Tensor:
    """``predict``'s loop: batches of ``batch`` windows, each with its 4 extra segments."""
    n = segments.shape[0] - 4
    out = []
    with torch.no_grad():
        for start in range(0, n, batch):
            b = min(batch, n - start)
            out.append(run(segments[start:start + b + 4]))
    return torch.cat(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[30, 80])
    ap.add_argument("--windows", type=int, default=128)
    ap.add_argument("--batch", type=int, default=0, help="windows per forward_windows call (0: inference_batch)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--variants", nargs="+", default=["reference", "chunked"])
    ap.add_argument("--model-dir", default=None, help="a model folder per size, {n} for the sensor count")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="JSON file to write")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from mscred.detector import inference_batch

    rows = []
    for n in args.sizes:
        net, source = _net(n, args.model_dir, args.seed)
        batch = args.batch or inference_batch("cpu", 32, n)
        g = torch.Generator().manual_seed(args.seed + n)
        seg = torch.rand(args.windows + 4, 3, n, n, generator=g)
        compiled: dict = {}
        runs = {v: _runner(net, v, compiled) for v in args.variants}
        # Validate first: every variant against the reference ops (float32) and against float64.
        ref = _forward(runs.get("reference") or _runner(net, "reference", compiled), seg, batch)
        with _env("MSCRED_CPU_CHUNKED", "0"), torch.no_grad():
            ref64 = _forward(lambda s: net.double().forward_windows(s, 5), seg.double(), batch)
        net.float()
        scale = float(ref.abs().max())
        check, setup = {}, {}
        for v, run in runs.items():
            t = time.perf_counter()
            _forward(run, seg[:batch + 4], batch)  # warm-up (and compile)
            setup[v] = time.perf_counter() - t
            got = _forward(run, seg, batch)
            check[v] = {"vs_reference_f32": float((got - ref).abs().max()) / scale,
                        "vs_reference_f64": float((got.double() - ref64).abs().max()) / float(ref64.abs().max())}
        times = {v: [] for v in args.variants}
        for r in range(args.repeats):
            order = args.variants[r % len(args.variants):] + args.variants[:r % len(args.variants)]
            for v in order:
                c, t = time.process_time(), time.perf_counter()
                _forward(runs[v], seg, batch)
                times[v].append((time.perf_counter() - t, time.process_time() - c))
            print(f"n={n} repeat {r}: " + "  ".join(f"{v} {times[v][-1][0]:.2f}s" for v in args.variants),
                  file=sys.stderr, flush=True)
        for v in args.variants:
            wall = [w for w, _ in times[v]]
            cpu = [c for _, c in times[v]]
            rows.append({"sensors": n, "variant": v, "windows": args.windows, "batch": batch, "model": source,
                         "wall_min": min(wall), "wall_median": statistics.median(wall), "wall": wall,
                         "cpu_min": min(cpu), "cpu_median": statistics.median(cpu),
                         "windows_per_s_median": args.windows / statistics.median(wall),
                         "first_call_s": setup[v], **check[v]})
    base = {r["sensors"]: r for r in rows if r["variant"] == args.variants[0]}
    print(f"| sensors | variant | wall min (s) | wall median (s) | CPU median (s) | speed-up (median) | "
          f"vs {args.variants[0]} f32 | vs f64 | first call (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        b = base[r["sensors"]]
        print(f"| {r['sensors']} | {r['variant']} | {r['wall_min']:.2f} | {r['wall_median']:.2f} | "
              f"{r['cpu_median']:.2f} | {b['wall_median'] / r['wall_median']:.2f}x | "
              f"{r['vs_reference_f32']:.1e} | {r['vs_reference_f64']:.1e} | {r['first_call_s']:.2f} |")
    if args.out:
        meta = {"command": " ".join(sys.argv), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads(),
                "cpu": platform.processor() or platform.machine(), "load_average": os.getloadavg()}
        with open(args.out, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
