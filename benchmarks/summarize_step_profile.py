"""Sums of a saved training-step profile (profile_train_step.py's train_step_profile.txt), for the README's figures.

From the graphed replays' table (its largest rows: the file keeps 45): time and kernels per family
(``bench_train.family_totals``); from one eager step's launch-order list: the weight-shaped copies and flips (casts of
a weight to bf16 channels-last, its slices, the small convolutions' flipped kernels: ops on 4-D tensors with a
kernel of at most 3 x 3, or on 2-D ones) and the fills (border strips and zeroed buffers). CPU only, reads text.

Usage: python3 benchmarks/summarize_step_profile.py benchmarks/results/train_cells/train_step_profile.txt [--out F]
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import bench_train as bt  # noqa: E402 (benchmarks/ is the script's own folder)

ROW = re.compile(r"\s*([\d.]+) us\s+x([\d.]+)\s+(.*)")
WEIGHT_OP = re.compile(r"aten::(copy_|flip) \[\[\d+, \d+(, [1-3], [1-3])?\]")


def graphed_rows(text: str) -> list[tuple[str, float, float]]:
    """(kernel, us per step, calls per step) of the graphed replays' table (up to the next section: with
    ``--levels`` the per-level tables follow it)."""
    start = text.index("## Graphed")
    end = text.find("\n## ", start)
    section = text[start:end if end >= 0 else len(text)]
    return [(m[3], float(m[1]), float(m[2])) for m in map(ROW.match, section.splitlines()) if m]


def sequence_lines(text: str) -> list[str]:
    """The lines of one eager step's launch-order list."""
    start = text.index("## One eager step")
    end = text.index("## ", start + 3)
    return text[start:end].splitlines()[2:]


def summary(text: str) -> list[str]:
    rows = graphed_rows(text)
    us = bt.family_totals((name, t) for name, t, _ in rows)
    calls = bt.family_totals((name, n) for name, _, n in rows)
    lines = [f"Graphed replays, the table's {len(rows)} largest rows: {sum(t for _, t, _ in rows) / 1e3:.3f} ms in "
             f"{sum(n for *_, n in rows):g} kernels per step", ""]
    lines += [f"{t:8.1f} us  {calls[fam]:5g} kernels  {fam}" for fam, t in us.items()]
    seq = sequence_lines(text)
    weights = [float(line.split()[0]) for line in seq if WEIGHT_OP.search(line)]
    fills = [float(line.split()[0]) for line in seq if "aten::fill_" in line]
    lines += ["", f"One eager step: {len(weights)} weight-shaped copies and flips, {sum(weights):.1f} us; "
              f"{len(fills)} fills, {sum(fills):.1f} us"]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    lines = summary(args.profile.read_text())
    text = f"`python3 benchmarks/summarize_step_profile.py {args.profile}`\n\n" + "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
