"""benchmarks/summarize_step_profile.py reproduces the README's sums from the committed training-step profile."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import summarize_step_profile as ssp  # noqa: E402


def test_the_committed_profile_sums_to_the_quoted_figures():
    text = (ROOT / "benchmarks/results/train_cells/train_step_profile.txt").read_text()
    rows = ssp.graphed_rows(text)
    assert len(rows) == 45 and abs(sum(t for _, t, _ in rows) - 3775) < 1
    lines = "\n".join(ssp.summary(text))
    assert "79 kernels  cuDNN / cuBLAS convolutions and GEMMs" in lines
    assert "53 weight-shaped copies and flips, 146.5 us" in lines


def test_a_profile_with_per_level_tables_sums_the_graphed_table_only():
    """With --levels the per-level tables follow the graphed one; they are not part of the step's sums."""
    text = (ROOT / "benchmarks/results/train_layout/train_step_profile.txt").read_text()
    rows = ssp.graphed_rows(text)
    assert len(rows) == 45 and abs(sum(t for _, t, _ in rows) - 3668) < 1
