"""benchmarks/bench_wgrad_gemm.py's identity: a 2 x 2 stride-1 convolution's weight gradient as four GEMMs over
shifted rows of the bordered channels-last buffers, against autograd in float64."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_wgrad_gemm  # noqa: E402


@pytest.mark.parametrize("seed", [0, 1])
def test_shifted_gemms_are_the_weight_gradient(seed):
    assert bench_wgrad_gemm.check(seed) < 1e-12


def test_a_wrong_border_breaks_it():
    """The identity needs the gradient's zero last row and column: without them the shifted rows mix images."""
    g = torch.Generator().manual_seed(3)
    x = torch.zeros(2, 3, 5, 5, dtype=torch.float64)
    x[:, :, :4, :4] = torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64)
    dy = torch.randn(2, 4, 4, 4, generator=g, dtype=torch.float64)
    right = bench_wgrad_gemm.shifted_gemm_wgrad(bench_wgrad_gemm.bordered_grad(dy), x)
    dirty = bench_wgrad_gemm.bordered_grad(dy)
    dirty[:, :, 4, :] = 1.0  # a non-zero border row
    assert not torch.allclose(bench_wgrad_gemm.shifted_gemm_wgrad(dirty, x), right)
