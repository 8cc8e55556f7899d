"""benchmarks/level_flops.py counts what the README quotes: a level's convolutions, forward and backward."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import level_flops  # noqa: E402


def test_a_level_counts_its_step_convolutions_forward_and_twice_backward():
    # Level 1: per step one (4Ch x 2C x 2 x 2) convolution over B*H*W pixels, 5 steps; the backward computes the
    # data and the weight gradient, each as much arithmetic as the forward.
    fwd, bwd = level_flops.level_flops(32, 30)
    expected = 2 * level_flops.BATCH * level_flops.STEPS * 30 * 30 * (2 * 32 * 2 * 2) * (4 * 32)
    assert fwd == expected and bwd == 2 * expected
