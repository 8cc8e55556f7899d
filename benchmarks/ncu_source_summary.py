"""Per-source-line summary of Nsight Compute's source page (``ncu --page source --print-source cuda,sass --csv``).

For each CSV: executed warp instructions and warp-stall samples per CUDA source line (inlined helpers keep their own
file and line), the kernel's stall-reason mix, and the top lines with their main stall reasons, as markdown.

    python3 benchmarks/ncu_source_summary.py benchmarks/results/conv_source/conv{1,2,4}.csv --top 12 \
        > benchmarks/results/conv_source/summary.md

The CSV interleaves, per source file, a "File Path" row, a "Function Name" row, a header row whose first cell is
"Line No", then one row per source line (a line number in the first cell) followed by that line's SASS rows. ncu
does not escape quotes inside the source text, so a row's metric cells are taken from its end: there are always as
many as the header has after its first four cells (line, source, address, SASS).
"""
from __future__ import annotations

import argparse
import collections
import csv
from dataclasses import dataclass, field
from pathlib import Path

INSTRUCTIONS = "Instructions Executed"
SAMPLES = "Warp Stall Sampling (All Samples)"


@dataclass
class Line:
    where: str               # file:line
    source: str
    instructions: int = 0
    samples: int = 0
    stalls: collections.Counter = field(default_factory=collections.Counter)


def _int(cell: str) -> int:
    cell = cell.strip()
    return int(cell) if cell.isdigit() else 0


def read_lines(path: Path) -> tuple[str, list[Line]]:
    """The kernel's name and its source lines with their counters."""
    kernel, header, file, lines = "", None, "", []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "File Path":
                file = row[1].rsplit("/", 1)[-1]
            elif row[0] == "Function Name":
                kernel = row[1]
            elif row[0] == "Line No":
                header = row
            elif header and row[0].strip().isdigit():
                names = header[4:]
                metrics = dict(zip(names, row[len(row) - len(names):]))
                source = ",".join(row[1:len(row) - len(names) - 2]).strip()
                stalls = collections.Counter({k[len("stall_"):]: _int(v) for k, v in metrics.items()
                                              if k.startswith("stall_") and "Not Issued" not in k and _int(v)})
                lines.append(Line(f"{file}:{row[0]}", source, _int(metrics.get(INSTRUCTIONS, "")),
                                  _int(metrics.get(SAMPLES, "")), stalls))
    return kernel, lines


def summarize(path: Path, top: int) -> str:
    kernel, lines = read_lines(path)
    total = sum(x.instructions for x in lines)
    samples = sum(x.samples for x in lines)
    mix = sum((x.stalls for x in lines), collections.Counter())
    mix_total = sum(mix.values()) or 1
    out = [f"## {path.stem}: `{kernel[:140]}`", "",
           f"{total:,} warp instructions executed, {samples:,} stall samples; stall mix: "
           + ", ".join(f"{k} {100 * v / mix_total:.1f}%" for k, v in mix.most_common(8)), "",
           "| line | instructions | share | stall samples | main stalls | source |", "| --- | --- | --- | --- | --- | --- |"]
    for x in sorted(lines, key=lambda x: -x.instructions)[:top]:
        main = ", ".join(f"{k} {v}" for k, v in x.stalls.most_common(2))
        src = x.source.replace("|", "\\|")[:90]
        out.append(f"| {x.where} | {x.instructions:,} | {100 * x.instructions / max(total, 1):.1f}% | "
                   f"{100 * x.samples / max(samples, 1):.1f}% | {main} | `{src}` |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=12, help="source lines per kernel, by executed instructions")
    args = ap.parse_args()
    print("\n".join(summarize(p, args.top) for p in args.csv))


if __name__ == "__main__":
    main()
