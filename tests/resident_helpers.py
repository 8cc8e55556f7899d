"""What the resident ConvLSTM kernel's GPU tests share (test_resident_lstm.py, test_lstm_attention.py): a level's
float64 inputs on the GPU, the relative error, and the skip where the kernel does not run."""
from __future__ import annotations

import pytest
import torch

from mscred.ops import resident_lstm


def level_inputs(B, T, C, Ch, n, seed):
    """x (B, T, C, n, n), the weight (4Ch, C + Ch, 2, 2) scaled to keep the gates in range, and the bias, float64
    on the GPU."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * Ch, C + Ch, 2, 2, generator=g, dtype=torch.float64) / (2 * (C + Ch) ** 0.5)
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64) * 0.5
    return [t.to("cuda") for t in (x, w, b)]


def rel(a, b):
    """||a - b|| / ||b|| in float64."""
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm()).item()


def skip_unless_it_runs(ch, n):
    """GPU tests of a shape the kernel takes on an H100/H200 skip on a GPU where its block does not fit (an A100
    takes level 1 only below ~690 pixels) or the extension does not build."""
    if not resident_lstm.runs(torch.bfloat16, "nhwc", False, ch, 2, n * n, torch.device("cuda")):
        pytest.skip(f"the resident kernel does not run here for {ch} channels at {n} x {n} (shared memory, or build)")
