"""benchmarks/bench_cell_math.py runs before it costs device time: its CPU dry run (Triton's interpreter, small
sizes) of the grid variants writes a row per level and variant, each variant's errors against float64 at the
default grid's (the grid changes only the bias gradient's summation order)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mscred.ops.triton import convlstm as fused

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not fused.is_available()[0], reason="the fused ConvLSTM needs Triton")


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="the dry run is the CPU interpreter's (CI runs it); on the GPU machine Triton 3.6's "
                           "interpreter cannot take a runtime loop bound with NumPy 2 (results/final_1202/)")
def test_dry_run_of_the_grid_variants(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_cell_math.py"), "--dry", "--set", "waves",
                          "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads((tmp_path / "cell_waves.json").read_text())["rows"]
    assert len(rows) == 2 * 4  # two levels in the dry run, four grid variants
    for level in {r["channels"] for r in rows}:
        errors = [r["errors"] for r in rows if r["channels"] == level]
        for e in errors[1:]:
            for name in ("h", "dx", "dw_x", "dw_h"):
                assert e[name] == pytest.approx(errors[0][name], rel=1e-6), name
            assert e["db"] == pytest.approx(errors[0]["db"], rel=0.05)
    assert "| 32, 6 | grid-stride, 8 per SM" in (tmp_path / "cell_waves.md").read_text()
    assert "| 32, 6 | TILES tiles a program (0)" in (tmp_path / "cell_waves.md").read_text()
