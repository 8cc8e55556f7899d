"""The temporal attention split over D (ops/triton/attention.py) at the training step's shapes, as CUDA-graph
replays, under every launch setting of the split against one program per sample.

Inputs as the training step hands them over: h (128, 5, C, n, n) bf16 stored channels-last (the fused ConvLSTM's
output), dout (128, C, n, n) channels-last, for the four levels at 30 sensors. Each op call -- the forward
``temporal_attention_fused`` (its output alone) and the backward ``temporal_attention_fused_backward`` with the
forward's partials, as the step calls it (saved scores) -- is captured alone in a CUDA graph per setting and its
replays timed (CUDA-event median of 20 after 5 warm-ups). Settings are ``MSCRED_ATTN_SPLIT`` = programs per SM / BLOCK
/ warps, optionally "+BLOCK/warps" for the first kernel's own tile (``MSCRED_ATTN_PARTIAL_TILE``, e.g.
"4/1024/4+1024/8") and "+apart" for its last step apart (``MSCRED_ATTN_LAST_APART=1``, e.g. "3/1024/4+apart";
"+apart-bwd" in the backward only); the first setting is the one the others are compared with ("0/1024/4", one program
per sample, the kernels before the split, unless MSCRED_ATTN_SWEEP says otherwise). Outputs are compared with the
first setting's (largest difference relative to the largest magnitude; the split sums the scores in another order).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_attention_split.py [--out DIR]
Writes DIR/attention_split.md, DIR/attention_split.json and DIR/best_split.env (the fastest setting in sum over
the eight calls, as the environment lines that select it).
"""
from __future__ import annotations

import argparse
import itertools
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed, _rel_diff  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

BATCH, STEPS = 128, 5
LEVELS = [(32, 30), (64, 15), (128, 8), (256, 4)]
# The first sweep (results/pack_split/attention/): per SM 4, 8, 16 x BLOCK 512, 1024 x warps 4, 8, "0/1024/4" first.
# MSCRED_ATTN_SWEEP="a,b,..." replaces the settings (the first the baseline), e.g. the second sweep's
# "0/1024/4,4/1024/4,2/1024/4,3/1024/4,6/1024/4,2/2048/4,3/2048/4,4/2048/4,4/2048/8".
SETTINGS = ["0/1024/4", *(f"{p}/{b}/{w}" for p, b, w in itertools.product((4, 8, 16), (512, 1024), (4, 8)))]
if os.environ.get("MSCRED_ATTN_SWEEP"):
    SETTINGS = os.environ["MSCRED_ATTN_SWEEP"].split(",")


def _environment(setting: str) -> dict[str, str]:
    """The variables of a setting "SPLIT[+PARTIAL][+apart|+apart-bwd]" (no PARTIAL: the first kernel takes the
    split's tile; "apart": MSCRED_ATTN_LAST_APART=1, the first kernel's last step apart, "apart-bwd" the
    backward's only)."""
    split, *rest = setting.split("+")
    apart = {"apart": "1", "apart-bwd": "bwd"}
    partial = next((r for r in rest if r not in apart), "")
    return {"MSCRED_ATTN_SPLIT": split, "MSCRED_ATTN_PARTIAL_TILE": partial,
            "MSCRED_ATTN_LAST_APART": next((apart[r] for r in rest if r in apart), "0")}


def _inputs(C: int, n: int):
    g = torch.Generator(device="cuda").manual_seed(C + n)
    h = torch.randn(BATCH, STEPS, n, n, C, device="cuda", generator=g).mul(0.3 / (C * n * n / STEPS) ** 0.25)
    h = h.to(torch.bfloat16).permute(0, 1, 4, 2, 3)  # (B, T, C, n, n) stored (B, T, n, n, C)
    dout = torch.randn(BATCH, C, n, n, device="cuda", generator=g).to(torch.bfloat16)
    return h, dout.contiguous(memory_format=torch.channels_last)


def main() -> None:
    from mscred.ops.triton import attention

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/attention_split")
    args = ap.parse_args()
    def forward(h):   # the output alone (the op also returns the split's partials, for the backward)
        return attention.temporal_attention_fused(h, False)[0]

    def backward_args(dout, h):   # the backward as the step calls it: with the forward's partials (saved scores)
        return dout, h, attention.temporal_attention_fused(h, False)[1]

    calls = []
    for C, n in LEVELS:
        h, dout = _inputs(C, n)
        calls.append(("forward", f"h {tuple(h.shape)}", forward, lambda h=h: (h,)))
        calls.append(("backward", f"h {tuple(h.shape)}", attention.temporal_attention_fused_backward,
                      lambda h=h, dout=dout: backward_args(dout, h)))
    rows = []
    for i, (direction, shape, op, make_args) in enumerate(calls):
        ref = None
        for setting in SETTINGS:
            os.environ.update(_environment(setting))
            call_args = make_args()   # (under the setting: the partials' layout follows the split)
            out = op(*call_args).clone()  # also compiles the setting's kernels outside the capture
            ref = out if ref is None else ref
            rows.append(dict(call=i, direction=direction, shape=shape, setting=setting,
                             ms=median_event_ms(_graphed(op, call_args).replay, iters=20),
                             rel_diff=_rel_diff([out], [ref])))
            print(rows[-1], flush=True)
    for name in _environment(SETTINGS[0]):
        del os.environ[name]
    meta = (f"{sweep_report.machine_line()}. Setting = MSCRED_ATTN_SPLIT (programs per SM / BLOCK / warps); the "
            "first is one program per sample. Command: `PYTHONPATH=src python3 benchmarks/bench_attention_split.py`.")
    lines = ["# The temporal attention split over D, at the training step's shapes (batch 128, bf16)", "", meta, "",
             "| call | direction | shape | setting | ms | vs first | largest difference (relative) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["call"] == r["call"])
        lines.append(f"| {r['call']} | {r['direction']} | {r['shape']} | {r['setting']} | {r['ms']:.4f} | "
                     f"{base / r['ms']:.2f}x | {r['rel_diff']:.1e} |")
    totals = {s: sum(r["ms"] for r in rows if r["setting"] == s) for s in SETTINGS}
    lines += ["", "Sums over the eight calls (ms):", "", "| setting | ms | vs first |", "| --- | --- | --- |"]
    lines += [f"| {s} | {totals[s]:.4f} | {totals[SETTINGS[0]] / totals[s]:.2f}x |" for s in SETTINGS]
    sweep_report.write(args.out, "attention_split", meta, rows, lines)
    with open(os.path.join(args.out, "best_split.env"), "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in _environment(min(SETTINGS, key=totals.get)).items() if v)


if __name__ == "__main__":
    main()
