"""The small-channel convolution's weight gradient in its taps-in-N form against the per-tap form, on the training
step's own deconv1 call (x 64 channels -> 3).

The per-tap form gives each of the k*k taps its own programs, each reading all of x (54 us of the graphed step's
3.0 ms for deconv1's call, results/concat_levels/); the taps-in-N form reads x once and gathers dz at every tap's
shift (``small_conv.taps_in_n``). One eager fused bf16 training step at batch 128 is run with
``small_conv_fused_backward`` recorded (``bench_bwd_tiles.record_calls``); every call the taps-in-N form takes is
replayed alone, captured in a CUDA graph, under the per-tap form (``MSCRED_SMALL_CONV_WGRAD_GATHER=0``) and under
every launch setting of the taps-in-N form (``MSCRED_SMALL_CONV_WGRAD_GATHER_TILE`` = pixels per tile / warps /
programs per SM): CUDA-event medians of 20 replays after 5 warm-ups, the whole op (weight gradient, the data
gradient's kernel and their small ops). Each output is compared with the per-tap form's (largest difference
relative to that output's largest magnitude; the sums are atomic adds in another order).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_small_conv_wgrad.py [--out DIR]
Writes DIR/small_conv_wgrad.md, .json and best_gather.env (the fastest taps-in-N setting, as a VAR=VALUE line).
"""
from __future__ import annotations

import argparse
import itertools
import os

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_bwd_tiles import _graphed, _rel_diff, _shape, record_calls  # noqa: E402
from bench_conv_layers import median_event_ms  # noqa: E402

TILE = "MSCRED_SMALL_CONV_WGRAD_GATHER_TILE"
SETTINGS = ["per-tap", *(f"{b}/{w}/{p}" for b, w, p in itertools.product((64, 128, 256), (4, 8), (1, 2, 4, 8)))]


def _set(setting: str) -> None:
    """The environment of one setting: the per-tap form, or the taps-in-N form with that launch setting."""
    if setting == "per-tap":
        os.environ["MSCRED_SMALL_CONV_WGRAD_GATHER"] = "0"
        os.environ.pop(TILE, None)
    else:
        os.environ.pop("MSCRED_SMALL_CONV_WGRAD_GATHER", None)
        os.environ[TILE] = setting


def main() -> None:
    from mscred.ops.triton import small_conv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/small_conv_wgrad")
    args = ap.parse_args()
    calls = [(i, op, a) for i, (kind, op, a) in enumerate(record_calls())
             if kind == "small_conv" and small_conv.taps_in_n(a[1].shape[1], a[2].shape[0], a[2].shape[-1])]
    rows = []
    for i, op, call_args in calls:
        ref = None
        for setting in SETTINGS:
            _set(setting)
            out = [t.clone() for t in op(*call_args)]  # also compiles the setting's kernel outside the capture
            ref = out if ref is None else ref
            rows.append(dict(call=i, shape=_shape("small_conv", call_args), setting=setting,
                             ms=median_event_ms(_graphed(op, call_args).replay, iters=20),
                             rel_diff=_rel_diff(out, ref)))
            print(rows[-1], flush=True)
    _set("per-tap")
    os.environ.pop("MSCRED_SMALL_CONV_WGRAD_GATHER")
    meta = (f"{sweep_report.machine_line()}. Against the per-tap form (the default before this sweep). "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_small_conv_wgrad.py`.")
    lines = ["# The small-channel convolution's weight gradient, taps-in-N against per-tap, on the training step's "
             "calls", "", meta, "", "| call | shapes | setting | ms | vs per-tap | largest difference (relative) |",
             "| --- | --- | --- | --- | --- | --- |"]
    totals: dict[str, float] = {}
    for r in rows:
        base = next(q["ms"] for q in rows if q["call"] == r["call"])
        lines.append(f"| {r['call']} | {r['shape']} | {r['setting']} | {r['ms']:.4f} | {base / r['ms']:.2f}x | "
                     f"{r['rel_diff']:.1e} |")
        totals[r["setting"]] = totals.get(r["setting"], 0.0) + r["ms"]
    if totals:
        best = min(SETTINGS[1:], key=totals.__getitem__)
        lines += ["", f"Sum over the calls: per-tap {totals['per-tap']:.4f} ms, the fastest taps-in-N setting {best} "
                  f"{totals[best]:.4f} ms ({totals['per-tap'] / totals[best]:.2f}x)."]
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "best_gather.env"), "w") as f:
            f.write(f"{TILE}={best}\n")
    sweep_report.write(args.out, "small_conv_wgrad", meta, rows, lines)


if __name__ == "__main__":
    main()
