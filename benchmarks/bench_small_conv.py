"""The small-channel convolution op (ops/triton/small_conv.py) against the cuDNN path it replaces, layer by layer.

conv1 (3 -> 32, 3 x 3, + bias + SELU, batch 640 images of 30 x 30) and deconv1 (64 -> 3, 3 x 3 stride-1
transposed + TF crop + bias, batch 128), channels-last, bf16 and float32 (TF32), cudnn.benchmark on. "cuDNN" is what
the fused model ran before: F.conv2d / F.conv_transpose2d without bias, then the fused bias + SELU (+ crop) op.
Forward and backward (the gradients the training step needs: conv1's weight and bias, deconv1's input, weight and
bias) are timed separately: CUDA events around 20 back-to-back calls, median of 7. The outputs are compared first.

Usage (a CUDA machine): PYTHONPATH=src python3 benchmarks/bench_small_conv.py [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import torch
import torch.nn.functional as F

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)
from mscred.ops.triton import small_conv as sc
from mscred.ops.triton.bias_act import bias_act


def _time(fn, reps=20, rounds=7) -> float:
    fn()
    torch.cuda.synchronize()
    return step_alternation.median_ms(fn, reps, rounds)


def _layer(name, x, w, bias, selu, deconv):
    """(rows) for ours and cuDNN: fwd ms, bwd ms, max rel. difference of the outputs."""
    def ours():
        weight = sc.deconv_as_conv(w) if deconv else w
        return sc.conv_act(x, weight, bias, selu)

    def cudnn():
        if deconv:
            y = F.conv_transpose2d(x, w, None, stride=1)
            k = w.shape[-1] // 2
            return bias_act(y, bias, selu, k, k, x.shape[2], x.shape[3])
        return bias_act(F.conv2d(x, w, None, padding=w.shape[-1] // 2), bias, selu)

    rows = []
    for label, fn in (("ours (Triton)", ours), ("cuDNN + bias_act", cudnn)):
        with torch.no_grad():
            t_f = _time(fn)
        out = fn()
        dout = torch.randn_like(out)
        inputs = [t for t in (x, w, bias) if t.requires_grad]
        t_b = _time(lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True))
        rows.append((label, t_f, t_b, out.detach()))
    diff = ((rows[0][3].float() - rows[1][3].float()).norm() / rows[1][3].float().norm()).item()
    return [(name, label, t_f, t_b, diff) for label, t_f, t_b, _ in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    cl = torch.channels_last
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        g = torch.Generator(device="cuda").manual_seed(0)
        x1 = torch.randn(640, 3, 30, 30, device="cuda", generator=g).to(dtype=dtype, memory_format=cl)
        w1 = (torch.randn(32, 3, 3, 3, device="cuda", generator=g) * 0.3).to(dtype).requires_grad_()
        b1 = torch.zeros(32, device="cuda", requires_grad=True)
        rows += _layer(f"conv1 3->32 {str(dtype)[6:]}", x1, w1, b1, True, False)
        x6 = torch.randn(128, 64, 30, 30, device="cuda", generator=g).to(dtype=dtype, memory_format=cl)
        x6.requires_grad_()
        w6 = (torch.randn(64, 3, 3, 3, device="cuda", generator=g) * 0.05).to(dtype).requires_grad_()
        b6 = torch.zeros(3, device="cuda", requires_grad=True)
        rows += _layer(f"deconv1 64->3 {str(dtype)[6:]}", x6, w6, b6, False, True)
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    lines = [f"# Small-channel convolutions: Triton op vs cuDNN + bias_act ({torch.cuda.get_device_name()})", "",
             f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {stamp}. Command: "
             "`PYTHONPATH=src python3 benchmarks/bench_small_conv.py`. ms per call (20 back-to-back calls between "
             "CUDA events, median of 7); backward = the gradients the training step takes.", "",
             "| layer | implementation | fwd ms | bwd ms | fwd + bwd ms | output rel. diff vs cuDNN |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, label, t_f, t_b, diff in rows:
        lines.append(f"| {name} | {label} | {t_f:.4f} | {t_b:.4f} | {t_f + t_b:.4f} | {diff:.1e} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "small_conv.md").write_text(text)


if __name__ == "__main__":
    main()
