"""The faster variant of an env_ab.py report: the value whose rounds' median ms a step is lowest.

Usage: python3 benchmarks/env_ab_winner.py DIR/env_ab.md FALLBACK -> prints the value (FALLBACK when the report has
no timed rows, e.g. the A/B did not finish), for a device script that measures the winner further.
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

ROW = re.compile(r"^\| \S+?='(?P<value>[^']*)' \| (?P<times>[0-9.]+(?: / [0-9.]+)*) \|")


def winner(report: str) -> str | None:
    """The value of the row with the lowest median, or None without timed rows."""
    medians = {}
    for line in report.splitlines():
        match = ROW.match(line)
        if match:
            medians[match["value"]] = statistics.median(float(t) for t in match["times"].split(" / "))
    return min(medians, key=medians.get) if medians else None


def main() -> None:
    path, fallback = Path(sys.argv[1]), sys.argv[2]
    found = winner(path.read_text()) if path.exists() else None
    print(fallback if found is None else found)


if __name__ == "__main__":
    main()
