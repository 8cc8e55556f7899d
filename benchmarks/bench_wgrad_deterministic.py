"""cuDNN's weight gradients of the training step with ``deterministic`` off (PyTorch's default) and on: time, kernels.

Why: in the graphed bf16 step eight of cuDNN's weight-gradient calls each launch an ``init_device_workspace_kernel``
before their split-K kernel (56.6 us of the 2.680 ms replay, results/step_profile_final/). PyTorch gives no handle
on the algorithm, but ``torch.backends.cudnn.deterministic`` narrows cuDNN's candidates; whether the narrowed set
drops those initialisations, and at what cost, is what this measures.

Each call (the step's shapes, bf16, channels-last, weight gradient only): cuDNN autotuned (``benchmark=True``) in
warm-up, then captured alone in a CUDA graph and its replays timed (median of 30), and one replay profiled for its
kernel names; dw compared with the same call in float32 with TF32 off.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_wgrad_deterministic.py [--out DIR]
Writes DIR/wgrad_deterministic.md and .json (DIR: benchmarks/results/wgrad_deterministic).
"""
from __future__ import annotations

import argparse

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms  # noqa: E402

# (label, dy (N, O, H, W), x (N, C, Hp, Wp), weight (O, C, k, k)) as in the step's launch-order profile
CALLS = (("level 1 LSTM (concatenated)", (640, 128, 30, 30), (640, 64, 31, 31), (128, 64, 2, 2)),
         ("level 2 LSTM (concatenated)", (640, 256, 15, 15), (640, 128, 16, 16), (256, 128, 2, 2)),
         ("level 3 LSTM, input", (640, 512, 8, 8), (640, 128, 9, 9), (512, 128, 2, 2)),
         ("level 3 LSTM, recurrent", (512, 512, 8, 8), (512, 128, 9, 9), (512, 128, 2, 2)),
         ("level 4 LSTM, input", (640, 1024, 4, 4), (640, 256, 5, 5), (1024, 256, 2, 2)),
         ("level 4 LSTM, recurrent", (512, 1024, 4, 4), (512, 256, 5, 5), (1024, 256, 2, 2)),
         ("encoder conv3 (stride 2)", (640, 128, 8, 8), (640, 64, 16, 16), (128, 64, 2, 2)),
         ("encoder conv2 (stride 2)", (640, 64, 15, 15), (640, 32, 31, 31), (64, 32, 3, 3)))


def _cl(shape, g):
    return (torch.randn(shape, device="cuda", generator=g) * 0.5).to(torch.bfloat16).contiguous(
        memory_format=torch.channels_last)


def _wgrad(dy, x, w, stride):
    return torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * 2, [0, 0], [1, 1], False, [0, 0], 1,
                                               [False, True, False])[1]


def _kernels(fn) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/wgrad_deterministic")
    args = ap.parse_args()
    rows = []
    for label, dy_shape, x_shape, w_shape in CALLS:
        g = torch.Generator(device="cuda").manual_seed(sum(dy_shape))
        dy, x, w = _cl(dy_shape, g), _cl(x_shape, g), _cl(w_shape, g)
        stride = (x_shape[-1] - w_shape[-1]) // (dy_shape[-1] - 1) if dy_shape[-1] > 1 else 1
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
            ref = _wgrad(dy.float(), x.float(), w.float(), stride)
        first = None
        for deterministic in (False, True):
            with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=deterministic,
                                            allow_tf32=True):
                for _ in range(3):
                    dw = _wgrad(dy, x, w, stride)  # autotune, outside the capture
                torch.cuda.synchronize()
                ms = graph_ms(lambda: _wgrad(dy, x, w, stride))
                names = _kernels(lambda: _wgrad(dy, x, w, stride))
            err = ((dw.float() - ref).abs().max() / ref.abs().max()).item()
            first = first or ms
            rows.append(dict(call=label, dy=list(dy_shape), deterministic=deterministic, us=round(ms * 1e3, 2),
                             vs_default=round(first / ms, 3), kernels=len(names),
                             workspace_init=sum("init_device_workspace" in n for n in names),
                             rel_err=float(f"{err:.2e}"), names=[n[:90] for n in names]))
            print({k: v for k, v in rows[-1].items() if k != "names"}, flush=True)
    sweep_report.table(
        args.out, "wgrad_deterministic", "bench_wgrad_deterministic.py",
        "cuDNN's weight gradients of the step, deterministic off / on",
        "bf16, channels-last, weight gradient only; cudnn.benchmark autotuned in warm-up; one call captured in a CUDA "
        "graph, median of 30 replays (graph launch included); kernels of one call by the profiler; error against the "
        "float32 call (TF32 off), relative to its largest magnitude.",
        ["call", "dy", "deterministic", "us a call", "vs off", "kernels", "workspace inits", "rel. error"], rows,
        lambda r: (r["call"], tuple(r["dy"]), r["deterministic"], r["us"], f"{r['vs_default']:.2f}x", r["kernels"],
                   r["workspace_init"], f"{r['rel_err']:.1e}"))


if __name__ == "__main__":
    main()
