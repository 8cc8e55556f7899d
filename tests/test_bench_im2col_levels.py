"""benchmarks/bench_im2col_levels.py's identities: a 2 x 2 stride-1 convolution (TF "same", the input bordered at the
bottom and right), its data gradient and its weight gradient as GEMMs over the im2col matrix, against PyTorch's
convolution in float64 -- what the GPU benchmark compares cuDNN with."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_im2col_levels as bench  # noqa: E402


@pytest.mark.parametrize("n, c, side", [(2, 3, 5), (3, 4, 1), (1, 8, 4)])
def test_gemms_on_the_im2col_equal_the_convolution(n, c, side):
    torch.manual_seed(n * 100 + c * 10 + side)
    products, gather = bench.calls(n, c, side, torch.float64, "cpu")
    assert gather().shape == (n * side * side, 4 * c)
    for name, (ref, gemm, pair) in products.items():
        expected, got = pair(ref(), gemm())
        assert got.shape == expected.shape, name
        assert bench.rel(got, expected) < 1e-12, name


def test_the_im2col_columns_are_tap_major_then_channel():
    x = torch.arange(2 * 3 * 3, dtype=torch.float64).reshape(1, 2, 3, 3)  # bordered 2 x 2 map, 2 channels
    col = bench.im2col(x.contiguous(memory_format=torch.channels_last))
    # pixel (0, 0): taps (0,0), (0,1), (1,0), (1,1), each with channels 0 and 1
    assert col[0].tolist() == [0.0, 9.0, 1.0, 10.0, 3.0, 12.0, 4.0, 13.0]
