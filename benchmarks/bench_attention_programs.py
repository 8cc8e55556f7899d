"""Sweep of the temporal attention's forward on the scoring path: programs per SM, warps, tile width.

Each level's attention of the thesis workload's scoring call (3,591 windows, 5 steps, channels-last bf16 hidden
states as the fused ConvLSTM stores them; levels 1-3 written into the channel half of a skip-connection buffer as
``temporal_attention_into`` does, level 4 dense) is timed while ``FWD_PROGRAMS_PER_SM`` (0 = one program per
sample; else that many per SM, each looping over samples, so that fewer samples are in flight and pass 2 may find
pass 1's reads in L2), ``NUM_WARPS`` and ``FWD_BLOCK`` vary. CUDA-event medians of 30 calls after 5 warm-ups;
outputs compared with the defaults' (rel. diff; the tile width changes the summation order).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_attention_programs.py [--out DIR]
Writes DIR/attention_programs.md and DIR/attention_programs.json.
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import json
import pathlib

import torch

from bench_conv_layers import median_event_ms  # noqa: E402 (benchmarks/ is the script's own folder)

LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
WINDOWS, STEPS = 3591, 5
PROGRAMS_PER_SM = (0, 1, 2, 3, 4)
WARPS = (8, 16)
BLOCKS = (1024, 2048)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/attention_programs")
    args = ap.parse_args()
    import triton

    from mscred.ops.triton import attention as attn
    defaults = (attn.FWD_PROGRAMS_PER_SM, attn.NUM_WARPS, attn.FWD_BLOCK)
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
        ref = run().double().clone()
        for per_sm, warps, block in itertools.product(PROGRAMS_PER_SM, WARPS, BLOCKS):
            attn.FWD_PROGRAMS_PER_SM, attn.NUM_WARPS, attn.FWD_BLOCK = per_sm, warps, block
            out = run().double()
            diff = ((out - ref).norm() / ref.norm()).item()
            ms = median_event_ms(run)
            row = dict(channels=ch, size=n, programs_per_sm=per_sm, warps=warps, block=block, ms=ms, rel_diff=diff)
            rows.append(row)
            print(row, flush=True)
        attn.FWD_PROGRAMS_PER_SM, attn.NUM_WARPS, attn.FWD_BLOCK = defaults
    meta = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
            f"{datetime.datetime.now(datetime.timezone.utc).isoformat()}. Defaults: FWD_PROGRAMS_PER_SM "
            f"{defaults[0]}, NUM_WARPS {defaults[1]}, FWD_BLOCK {defaults[2]}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_attention_programs.py`.")
    lines = ["# Attention forward on the scoring path (3,591 windows, bf16, channels-last)", "", meta, "",
             "| level (channels, size) | programs per SM | warps | FWD_BLOCK | ms | vs defaults | rel. diff |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(q["ms"] for q in rows if q["channels"] == r["channels"]
                    and (q["programs_per_sm"], q["warps"], q["block"]) == defaults)
        lines.append(f"| {r['channels']}, {r['size']} | {r['programs_per_sm']} | {r['warps']} | {r['block']} | "
                     f"{r['ms']:.3f} | {base / r['ms']:.2f}x | {r['rel_diff']:.1e} |")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "attention_programs.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (out / "attention_programs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
