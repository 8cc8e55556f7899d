"""Where the fused bf16 training step's convolution time goes: every convolution of the step timed alone.

The fused + CUDA graph + bf16 step (batch 128 windows of 5 steps, n = 30, channels 32/64/128/256, ConvLSTM kernel
2) spends ~2.3 ms of its ~4.1 ms of kernels in cuDNN (results/train.md's profile), but the profile names kernels,
not layers. Here each convolution of the step is run alone with the step's shapes, dtype (bf16), layout
(channels-last) and cuDNN's autotuning on: forward, data gradient and weight gradient, CUDA-event medians, times
the number of calls per step, beside its FLOPs and achieved TFLOP/s. Alternatives for the worst layers are timed in
the same run (marked "alt"): the 3-channel convolutions with their channels zero-padded to 8, and the stride-2
convolutions with TF's asymmetric padding without the padded copy of their input.

Usage (a CUDA machine): PYTHONPATH=src python3 benchmarks/bench_conv_layers.py [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import torch
import torch.nn.functional as F

B, T, N = 128, 5, 30
LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))  # (channels, size) of ConvLSTM levels 1..4


def _specs():
    """(name, calls per step, x shape, w shape, stride, padding, transposed, parts timed: f(wd), d(grad), w(grad))."""
    bt = B * T
    s = [("enc conv1 3->32 k3 s1", 1, (bt, 3, 30, 30), (32, 3, 3, 3), 1, 1, False, "fw"),
         ("enc conv2 32->64 k3 s2 (on the padded copy)", 1, (bt, 32, 31, 31), (64, 32, 3, 3), 2, 0, False, "fdw"),
         ("enc conv3 64->128 k2 s2 (on the padded copy)", 1, (bt, 64, 16, 16), (128, 64, 2, 2), 2, 0, False, "fdw"),
         ("enc conv4 128->256 k2 s2", 1, (bt, 128, 8, 8), (256, 128, 2, 2), 2, 0, False, "fdw")]
    for lvl, (c, h) in enumerate(LEVELS, start=1):
        s.append((f"L{lvl} lstm input conv (5 steps at once)", 1, (bt, c, h, h), (4 * c, c, 2, 2), 1, 1, False, "fdw"))
        s.append((f"L{lvl} lstm recurrent conv (per step)", 4, (B, c, h + 1, h + 1), (4 * c, c, 2, 2), 1, 0, False,
                  "fd"))
        s.append((f"L{lvl} lstm recurrent wgrad (4 steps at once)", 1, (4 * B, c, h + 1, h + 1), (4 * c, c, 2, 2), 1,
                  0, False, "w"))
    s += [("dec deconv4 256->128 k2 s2", 1, (B, 256, 4, 4), (256, 128, 2, 2), 2, 0, True, "fdw"),
          ("dec deconv3 256->64 k2 s2", 1, (B, 256, 8, 8), (256, 64, 2, 2), 2, 0, True, "fdw"),
          ("dec deconv2 128->32 k3 s2", 1, (B, 128, 15, 15), (128, 32, 3, 3), 2, 0, True, "fdw"),
          ("dec deconv1 64->3 k3 s1", 1, (B, 64, 30, 30), (64, 3, 3, 3), 1, 0, True, "fdw")]
    alts = [("alt: enc conv1, channels padded 3->8", 1, (bt, 8, 30, 30), (32, 8, 3, 3), 1, 1, False, "fw"),
            ("alt: dec deconv1, out channels padded 3->8", 1, (B, 64, 30, 30), (64, 8, 3, 3), 1, 0, True, "fdw")]
    return s, alts


def median_event_ms(fn, iters=30) -> float:
    """Median CUDA-event time of ``fn`` in ms over ``iters`` calls after 5 warm-ups (bench_window_model.py too)."""
    for _ in range(5):
        fn()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


def _row(spec):
    name, calls, xs, ws, stride, pad, transposed, parts = spec
    cl = torch.channels_last
    x = torch.randn(xs, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    w = (torch.randn(ws, device="cuda", dtype=torch.bfloat16) * 0.05).to(memory_format=cl)
    conv = F.conv_transpose2d if transposed else F.conv2d
    y = conv(x, w, None, stride=stride, padding=pad)
    dy = torch.randn_like(y)
    args = ([stride] * 2, [pad] * 2, [1, 1], transposed, [0, 0], 1)
    t_f = median_event_ms(lambda: conv(x, w, None, stride=stride, padding=pad)) if "f" in parts else 0.0
    t_d = median_event_ms(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, *args, [True, False, False])) \
        if "d" in parts else 0.0
    t_w = median_event_ms(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, *args, [False, True, False])) \
        if "w" in parts else 0.0
    # MACs: output elements x reduction length (for a transposed conv, the input plays the output's role).
    small = x if transposed else y
    red = ws[1] * ws[2] * ws[3]  # (O, C, kh, kw) conv: C*kh*kw per output; (C, O, kh, kw) deconv: O*kh*kw per input
    flops = 2 * small.numel() * red
    ms = (t_f + t_d + t_w) * calls
    return {"layer": name, "calls": calls, "fwd_ms": t_f, "dgrad_ms": t_d, "wgrad_ms": t_w, "step_ms": ms,
            "gflop_per_call_fwd": flops / 1e9,
            "tflops_fwd": (flops / t_f / 1e9) if t_f else None, "tflops_wgrad": (flops / t_w / 1e9) if t_w else None,
            "tflops_dgrad": (flops / t_d / 1e9) if t_d else None}


def _pad_copy_ms() -> dict:
    """The copies the asymmetric TF padding costs now: F.pad of conv2's / conv3's input (forward) and the crop of
    its gradient (backward, a slice made contiguous)."""
    out = {}
    for name, shape in (("conv2 input", (B * T, 32, 30, 30)), ("conv3 input", (B * T, 64, 15, 15))):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        xp = F.pad(x, (0, 1, 0, 1))
        out[f"pad {name}"] = median_event_ms(lambda: F.pad(x, (0, 1, 0, 1)))
        out[f"crop grad {name}"] = median_event_ms(
            lambda: xp[:, :, :-1, :-1].contiguous(memory_format=torch.channels_last))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    specs, alts = _specs()
    rows = [_row(s) for s in specs]
    alt_rows = [_row(s) for s in alts]
    copies = _pad_copy_ms()
    total = sum(r["step_ms"] for r in rows)
    meta = {"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}
    lines = [f"# Convolutions of the fused bf16 training step, each alone ({meta['gpu']})", "",
             f"torch {meta['torch']}, cuDNN {meta['cudnn']}, {meta['date_utc']}; bf16, channels-last, "
             "cudnn.benchmark. Command: `PYTHONPATH=src python3 benchmarks/bench_conv_layers.py`. ms = CUDA-event "
             "median of 30; 'per step' = (fwd + dgrad + wgrad) x calls.", "",
             "| layer | calls | fwd ms | dgrad ms | wgrad ms | per step ms | GFLOP fwd | TFLOP/s fwd / dgrad / wgrad |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows + alt_rows:
        rate = " / ".join(f"{r[k]:.0f}" if r[k] else "-" for k in ("tflops_fwd", "tflops_dgrad", "tflops_wgrad"))
        lines.append(f"| {r['layer']} | {r['calls']} | {r['fwd_ms']:.4f} | {r['dgrad_ms']:.4f} | {r['wgrad_ms']:.4f} "
                     f"| {r['step_ms']:.3f} | {r['gflop_per_call_fwd']:.2f} | {rate} |")
    lines += ["", f"Sum over the step's convolutions (not the alternatives): {total:.3f} ms.", "",
              "Copies of the asymmetric padding (ms): " + ", ".join(f"{k} {v:.4f}" for k, v in copies.items()), ""]
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "conv_layers.md").write_text(text)
    (out / "conv_layers.json").write_text(json.dumps({"meta": meta, "rows": rows, "alternatives": alt_rows,
                                                      "copies_ms": copies, "total_ms": total}, indent=1))


if __name__ == "__main__":
    main()
