"""Encoder convolutions, forward, batch 640 images (128 windows x 5 steps), n = 30: cuDNN vs our CUDA kernels.

Providers, each computing conv (TF "same" padding) + bias + SELU of one encoder layer:
    cudnn            ``mscred.ops.reference.conv2d``: F.pad + cuDNN conv (TF32, PyTorch's default) + F.selu
    unfold+matmul    PyTorch's own im2col + GEMM (F.unfold, matmul), the op's CPU path run on the GPU
    global           our im2col kernel + GEMM reading global memory (float32)
    shared           our im2col kernel + shared-memory tiled GEMM (float32)
    implicit         our implicit-GEMM kernel: no column matrix, TF32 tensor cores, bias + SELU in the epilogue
    implicit-pipe    the same with a table-driven gather and a multi-stage cp.async pipeline (issue 7, H5b)
Also forward + backward (what training pays) for cudnn and our three variants.

Correctness first, in this script: every provider's output (and the backward's gradients) against float64 on
fresh random inputs; a wrong provider is reported as wrong. Times are medians of ``triton.testing.do_bench``
(CUDA events, L2 flushed between runs). Ceilings measured in the same run: device-to-device copy bandwidth (bytes
read + written) and the TF32 matrix-product rate. Writes conv.json and conv.md to --out.

Usage: PYTHONPATH=src python3 benchmarks/bench_conv.py [--out benchmarks/results] [--batch 640] [--n 30]
       [--skip implicit-pipe ...]   (leave providers out, e.g. to rerun after one of them faulted the device)
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import torch

from mscred.atomic import atomic_path
from mscred.ops import im2col
from mscred.ops.reference import conv2d as reference_conv2d
from mscred.ops.reference import same_padding

ENCODER = [("conv1", 3, 32, 3, 1), ("conv2", 32, 64, 3, 2), ("conv3", 64, 128, 2, 2), ("conv4", 128, 256, 2, 2)]
PROVIDERS = {
    "cudnn": reference_conv2d,
    "unfold+matmul": lambda x, w, b, s, p, a: im2col._torch_forward(x, w, b, s, p, a),
    "global": im2col.conv2d_im2col_global,
    "shared": im2col.conv2d_im2col_shared,
    "implicit": im2col.conv2d_implicit,
    "implicit-pipe": im2col.conv2d_implicit_pipelined,
}
TRAINABLE = ("cudnn", "global", "shared", "implicit", "implicit-pipe")
IMPLICIT = ("implicit", "implicit-pipe")


def bench(fn) -> float:
    """Median milliseconds of fn() by CUDA events, L2 flushed before each run."""
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=150, return_mode="median"))


def bench_graphed(fn) -> tuple[float, str]:
    """(ms, how) of fn() replayed from a CUDA graph, L2 flushed before each replay, else of fn() itself.

    ``bench`` times one call after each L2 flush: on a host whose Python + dispatch time per call exceeds the flush's
    GPU time, host time shows in the result (suspected in results/conv_run2.md). A graph replay costs the host
    a few microseconds whatever fn does, so this times the kernels. Not yet run on a GPU (next session's check)."""
    try:
        graph = capture(fn)
    except Exception as err:  # noqa: BLE001 - an op that cannot be captured is timed the plain way, and says so
        torch.cuda.synchronize()
        return bench(fn), f"eager (capture failed: {type(err).__name__})"
    return bench(graph.replay), "graph"


def capture(fn) -> "torch.cuda.CUDAGraph":
    """fn() captured in a CUDA graph, after 3 warm-up calls on a side stream (autotuning, allocations, lazy
    initialisation happen outside the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def ceilings() -> dict:
    n = 1 << 28  # 1 GiB of float32
    a = torch.rand(n, device="cuda")
    b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a))
    copy_gbs = 2 * a.numel() * 4 / ms / 1e6
    del a, b
    m = 8192
    x = torch.randn(m, m, device="cuda")
    y = torch.randn(m, m, device="cuda")
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    ms = bench(lambda: x @ y)
    torch.backends.cuda.matmul.allow_tf32 = prev
    return {"copy_GBps": copy_gbs, "tf32_matmul_TFLOPs": 2 * m ** 3 / ms / 1e9}


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def layer_inputs(cin, cout, k, size, batch, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(batch, cin, size, size, device="cuda", generator=g)           # signature-matrix-like, > 0
    w = torch.randn(cout, cin, k, k, device="cuda", generator=g) / (k * cin ** 0.5)
    b = torch.randn(cout, device="cuda", generator=g) * 0.1
    return x, w, b


def _grads_with_branches_of(y, x64, w64, b64, stride, pad, dout):
    """float64 gradients of conv + bias + SELU with SELU's branch taken where ``y`` took it.

    A TF32 forward moves pre-activations near 0 across SELU's kink (slope 1.051 above, up to 1.758 below), so its
    gradients differ from the exact ones by ~5e-3 at this size even when the backward is exact; against gradients
    that take the same branches, what remains is the backward's own error (the tests do the same).
    """
    xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x64, w64, b64))
    z = reference_conv2d(xs, ws, bs, stride, pad, False)
    scale, alpha = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
    slope = torch.where(y.detach().double() > 0, torch.full_like(z, scale),
                        scale * alpha * torch.exp(z.detach().clamp(max=0)))
    return torch.autograd.grad(z, (xs, ws, bs), dout.double() * slope)


def check(name, fn, x, w, b, stride, pad, dout, cudnn=None) -> dict:
    """Forward and all gradients of one provider against float64 on these inputs and output gradient.

    Tolerances: y within TF32 rounding (2e-3) for the TF32 providers (cuDNN, implicit), float32 rounding (1e-4)
    otherwise. Gradients: against float64 gradients that take SELU's branches where this provider's output took
    them (``_grads_with_branches_of``), within 2x cuDNN's own gradient error (or 1e-4; 2e-3 for our TF32 forwards,
    whose saved output, TF32-rounded, sets SELU's slope below 0).
    """
    x64, w64, b64 = (t.double().requires_grad_() for t in (x, w, b))
    ref = reference_conv2d(x64, w64, b64, stride, pad, True)
    xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = fn(xs, ws, bs, stride, pad, True)
    out = {"y": rel(y, ref)}
    if name in TRAINABLE:
        grads = torch.autograd.grad(y, (xs, ws, bs), dout)
        ref_grads = _grads_with_branches_of(y, x64, w64, b64, stride, pad, dout)
        out.update({k: rel(g, r) for k, g, r in zip(("dx", "dw", "db"), grads, ref_grads)})
    tf32 = name in ("cudnn",) + IMPLICIT
    finite = all(v == v for v in out.values())
    floor = 2e-3 if name in IMPLICIT else 1e-4
    grads_ok = all(out[k] <= max(2 * (cudnn or out)[k], floor) for k in ("dx", "dw", "db") if k in out)
    out["ok"] = bool(finite and out["y"] < (2e-3 if tf32 else 1e-4) and grads_ok)
    return out


def markdown(result: dict) -> str:
    """conv.md from conv.json's content (also: `python3 benchmarks/bench_conv.py --markdown conv.json`)."""
    meta, lim, rows, targets = result["meta"], result["ceilings"], result["layers"], result["targets"]
    enc, enc_train = result["encoder_fwd_ms"], result["encoder_fwd_bwd_ms"]
    providers = list(rows[0]["providers"])
    implicit = [p for p in IMPLICIT if p in providers]
    skipped = meta.get("skipped", [])
    lines = [f"# Encoder convolutions, forward, batch {meta['batch']}, n = {meta['n']} — {meta['gpu']}", "",
             f"torch {meta['torch']}, CUDA {meta['cuda']}, cuDNN {meta['cudnn']}, {meta['date']}. "
             f"Measured ceilings: copy {lim['copy_GBps']:.0f} GB/s, TF32 matmul {lim['tf32_matmul_TFLOPs']:.0f} "
             f"TFLOP/s. Timing: {meta.get('timing', 'eager')} (L2 flushed before each call; 'graph' = replayed from a CUDA graph). "
             f"Command: `{meta['command']}`", "",
             "| layer | provider | correct (rel err y) | fwd ms | GB/s | TFLOP/s | x cuDNN | fwd+bwd ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = r["providers"]["cudnn"]["fwd_ms"]
        for p, e in r["providers"].items():
            fb = f"{e['fwd_bwd_ms']:.4f}" if "fwd_bwd_ms" in e else "-"
            lines.append(f"| {r['layer']} | {p} | {'ok' if e['correct']['ok'] else 'WRONG'} "
                         f"({e['correct']['y']:.1e}) | {e['fwd_ms']:.4f} | {e['GBps']:.0f} | {e['TFLOPs']:.1f} | "
                         f"{base / e['fwd_ms']:.2f} | {fb} |")
    sg = targets["shared_vs_global_encoder"]
    lines += ["", "| encoder total | " + " | ".join(providers) + " |", "| --- |" + " --- |" * len(providers),
              "| forward ms | " + " | ".join(f"{enc[p]:.4f}" for p in providers) + " |",
              "| fwd+bwd ms | " + " | ".join(f"{enc_train[p]:.4f}" if p in enc_train else "-" for p in providers)
              + " |", "",
              f"Targets: shared vs global on the encoder {'-' if sg is None else f'{sg:.2f}x'} (want >= 2)."
              + (f" Left out: {', '.join(skipped)}." if skipped else "")]
    for p in implicit:
        lines.append(f"{p} vs cuDNN per layer " + ", ".join(f"{k} {v:.2f}x" for k, v in
                                                           targets["implicit_vs_cudnn"][p].items())
                     + f" (want >= 3); {p} GB/s as a fraction of copy bandwidth "
                     + ", ".join(f"{k} {v:.2f}" for k, v in targets["implicit_fraction_of_copy_bw"][p].items())
                     + f" (want >= 0.5 on the memory-bound layers: {', '.join(targets['memory_bound_layers'])}).")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--batch", type=int, default=640)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--skip", nargs="*", default=[], choices=[p for p in PROVIDERS if p != "cudnn"],
                    help="providers to leave out")
    ap.add_argument("--timing", choices=("eager", "graph"), default="eager",
                    help="time each call as is (default) or replayed from a CUDA graph (no host time per call)")
    ap.add_argument("--markdown", metavar="CONV_JSON", help="only print the markdown table of a saved conv.json")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return 0
    providers = {k: v for k, v in PROVIDERS.items() if k not in args.skip}
    implicit = [p for p in IMPLICIT if p in providers]
    if not torch.cuda.is_available():
        print("bench_conv: needs a CUDA device", file=sys.stderr)
        return 2
    ok, why = im2col.is_available()
    print(f"im2col CUDA kernels: {ok} ({why})", flush=True)
    lim = ceilings()
    print(f"ceilings: copy {lim['copy_GBps']:.0f} GB/s, TF32 matmul {lim['tf32_matmul_TFLOPs']:.0f} TFLOP/s",
          flush=True)

    rows = []
    size = args.n
    for li, (name, cin, cout, k, stride) in enumerate(ENCODER):
        pad = same_padding(size, k, stride)
        x, w, b = layer_inputs(cin, cout, k, size, args.batch, seed=li)
        ho = -(-size // stride)
        flops = 2 * args.batch * cout * ho * ho * cin * k * k
        nbytes = 4 * (x.numel() + w.numel() + b.numel() + args.batch * cout * ho * ho)
        row = {"layer": name, "in": [args.batch, cin, size, size], "kernel": k, "stride": stride,
               "padding": list(pad), "out": [args.batch, cout, ho, ho], "GFLOP": flops / 1e9,
               "min_MB": nbytes / 1e6, "providers": {}}
        dout = torch.randn(args.batch, cout, ho, ho, device=x.device,
                           generator=torch.Generator(device=x.device).manual_seed(100 + li))
        cudnn_err = None
        for pname, fn in providers.items():
            acc = check(pname, fn, x, w, b, stride, pad, dout, cudnn_err)
            cudnn_err = acc if pname == "cudnn" else cudnn_err
            timed = (lambda f: bench_graphed(f)) if args.timing == "graph" else (lambda f: (bench(f), "eager"))
            fwd, how = timed(lambda: fn(x, w, b, stride, pad, True))
            entry = {"correct": acc, "fwd_ms": fwd, "GBps": nbytes / fwd / 1e6, "TFLOPs": flops / fwd / 1e9,
                     "timing": how}
            if pname in TRAINABLE:
                xg, wg, bg = (t.detach().clone().requires_grad_() for t in (x, w, b))
                # conv1's input is data (no grad needed); the deeper layers need dx too, as in training.
                xg.requires_grad_(li > 0)

                def step():
                    y = fn(xg, wg, bg, stride, pad, True)
                    torch.autograd.grad(y, [t for t in (xg, wg, bg) if t.requires_grad], dout)
                entry["fwd_bwd_ms"], entry["timing_fwd_bwd"] = timed(step)
            row["providers"][pname] = entry
            print(f"  {name} {pname:14s} fwd {fwd:8.4f} ms  {entry['GBps']:7.0f} GB/s  {entry['TFLOPs']:6.1f} "
                  f"TFLOP/s  ok={acc['ok']}", flush=True)
        rows.append(row)
        size = ho

    enc = {p: sum(r["providers"][p]["fwd_ms"] for r in rows) for p in providers}
    enc_train = {p: sum(r["providers"][p]["fwd_bwd_ms"] for r in rows) for p in TRAINABLE if p in providers}
    ridge = lim["tf32_matmul_TFLOPs"] * 1e12 / (lim["copy_GBps"] * 1e9)  # FLOP/byte where TF32 work = copy time
    targets = {
        "shared_vs_global_encoder": enc["global"] / enc["shared"] if {"global", "shared"} <= set(enc) else None,
        "implicit_vs_cudnn": {p: {r["layer"]: r["providers"]["cudnn"]["fwd_ms"] / r["providers"][p]["fwd_ms"]
                                  for r in rows} for p in implicit},
        "memory_bound_layers": [r["layer"] for r in rows if r["GFLOP"] * 1e9 / (r["min_MB"] * 1e6) < ridge],
        "implicit_fraction_of_copy_bw": {p: {r["layer"]: r["providers"][p]["GBps"] / lim["copy_GBps"]
                                             for r in rows} for p in implicit},
    }
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "batch": args.batch, "n": args.n, "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "timing": args.timing, "skipped": list(args.skip),
            "command": "PYTHONPATH=src python3 benchmarks/bench_conv.py " + " ".join(argv or sys.argv[1:])}
    result = {"meta": meta, "ceilings": lim, "layers": rows, "encoder_fwd_ms": enc, "encoder_fwd_bwd_ms": enc_train,
              "targets": targets}

    out = Path(args.out)
    with atomic_path(out / "conv.json") as p:
        p.write_text(json.dumps(result, indent=2))
    text = markdown(result)
    with atomic_path(out / "conv.md") as p:
        p.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
