"""benchmarks/conv1_wgrad_readings.py's calls, each run once on a CPU under Triton's interpreter at a small size:
the script's one device call must not be spent on a wrong argument. The op's results are the op's own tests'
business (tests/test_ops_triton_small_conv.py); here: each call runs, and the variants that read the same maps
agree (a copy of the maps in buffers of their own gives the same gradients as the bordered views)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from mscred.ops.triton import small_conv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
readings = pytest.importorskip("conv1_wgrad_readings")

pytestmark = pytest.mark.skipif(not small_conv.is_available()[0],
                                reason=f"fused small conv unavailable: {small_conv.is_available()[1]}")


def test_every_call_runs_and_the_copies_agree():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    results = {name: fn() for name, fn, _ in readings.calls((2, 32, 5, 7), device, dtype)}
    assert list(results) == ["back to back", "maps in buffers of their own size", "without level 1's gradient",
                             "without SELU (the output not read)", "plain read of the three maps (PyTorch sums)"]
    same, copied = results["back to back"], results["maps in buffers of their own size"]
    for a, b in zip(same[1:], copied[1:]):  # (dweight, dbias; dx is empty)
        assert torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(same[1].float(), results["without level 1's gradient"][1].float())
