"""benchmarks/env_ab_winner.py: the device scripts that measure an A/B's winner further take its answer, so it must
read env_ab.py's report as written (the committed results are such reports) and pick the lowest median."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import env_ab_winner  # noqa: E402


def test_reads_the_committed_reports():
    results = ROOT / "benchmarks" / "results"
    assert env_ab_winner.winner((results / "decoder_cat" / "env_ab.md").read_text()) == "1"
    assert env_ab_winner.winner((results / "green_wgrad" / "env_ab.md").read_text()) == ""  # unset won


def test_the_median_decides_not_the_best_round():
    report = ("| MSCRED_X='a' | 2.000 / 2.500 / 2.500 | 0.1 |\n"
              "| MSCRED_X='b' | 2.400 / 2.410 / 2.420 | 0.1 |\n")
    assert env_ab_winner.winner(report) == "b"


def test_fallback_without_timed_rows(tmp_path):
    report = tmp_path / "env_ab.md"
    report.write_text("# the A/B did not finish\n")
    for path in (report, tmp_path / "missing.md"):
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "env_ab_winner.py"), str(path), "0"],
                             capture_output=True, text=True, check=True).stdout
        assert out == "0\n"
