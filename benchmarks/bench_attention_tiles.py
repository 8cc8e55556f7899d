"""Sweep of the temporal attention's forward tile on the scoring path: elements per iteration x warps.

Each level's attention of the thesis workload's scoring call (3,591 windows, 5 steps, channels-last bf16 hidden
states as the fused ConvLSTM stores them; levels 1-3 written into the channel half of a skip-connection buffer as
``temporal_attention_into`` does, level 4 dense) is timed for each forward tile (MSCRED_ATTN_FWD_TILE =
"BLOCK/warps"), the first row of a level being the previous default, 2048 x 16. CUDA-event medians of 30 calls after
5 warm-ups; outputs compared with that first row's (rel. diff; the tile width changes the summation order).

The first sweep (results/attention_programs/, commit 8ea7025's bench_attention_programs.py) also tried programs
looping over samples (fewer in flight, so that pass 2 would find pass 1's reads in L2): slower or even, dropped.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_attention_tiles.py [--out DIR]
Writes DIR/attention_tiles.md and DIR/attention_tiles.json.
"""
from __future__ import annotations

import argparse
import itertools
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_conv_layers import median_event_ms  # noqa: E402

LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
WINDOWS, STEPS = 3591, 5
BASELINE = (2048, 16)  # the forward tile before 2026-11-30's first sweep
TILES = (BASELINE, *itertools.product((512, 1024, 2048), (4, 8, 16)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/attention_tiles")
    args = ap.parse_args()
    from mscred.ops.triton import attention as attn
    defaults = (attn.FWD_BLOCK, attn.FWD_WARPS)
    torch.manual_seed(0)
    rows = []
    for level, (ch, n) in enumerate(LEVELS, start=1):
        h = (torch.rand(WINDOWS, STEPS, n, n, ch, device="cuda", dtype=torch.bfloat16) * 2 - 1) * 0.5
        h = h.permute(0, 1, 4, 2, 3)  # (B, T, C, H, W) stored (B, T, H, W, C), as the fused ConvLSTM's output
        buf = torch.empty(WINDOWS, 2 * ch, n, n, device="cuda", dtype=torch.bfloat16,
                          memory_format=torch.channels_last)

        def run():
            if level == 4:
                return attn.temporal_attention(h)
            return attn.temporal_attention_into(h, buf[:, ch:])
        ref = None
        for block, warps in TILES:
            os.environ["MSCRED_ATTN_FWD_TILE"] = f"{block}/{warps}"
            out = run().double().clone()
            ref = out if ref is None else ref
            diff = ((out - ref).norm() / ref.norm()).item()
            ms = median_event_ms(run)
            row = dict(channels=ch, size=n, block=block, warps=warps, ms=ms, rel_diff=diff)
            rows.append(row)
            print(row, flush=True)
        os.environ.pop("MSCRED_ATTN_FWD_TILE")
    meta = (f"{sweep_report.machine_line()}. The module's defaults: FWD_BLOCK {defaults[0]}, FWD_WARPS "
            f"{defaults[1]}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_attention_tiles.py`.")
    lines = ["# Attention forward tiles on the scoring path (3,591 windows, bf16, channels-last)", "", meta, "",
             "| level (channels, size) | FWD_BLOCK | warps | ms | vs 2048 x 16 | rel. diff |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["channels"] == r["channels"] and (q["block"], q["warps"]) == BASELINE)
        lines.append(f"| {r['channels']}, {r['size']} | {r['block']} | {r['warps']} | {r['ms']:.3f} | "
                     f"{base / r['ms']:.2f}x | {r['rel_diff']:.1e} |")
    sweep_report.write(args.out, "attention_tiles", meta, rows, lines)


if __name__ == "__main__":
    main()
