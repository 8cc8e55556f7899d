"""ops.concat.cat_channels: torch.cat along channels of channels-last tensors, copied in words, same values and
gradients as torch.cat."""
from __future__ import annotations

import pytest
import torch

from mscred.ops.concat import cat_channels


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("ca, cb", [(32, 32), (4, 8), (3, 5)])  # 3, 5: not whole words of bf16, the fallback copy
def test_equals_torch_cat_with_its_gradient(dtype, ca, cb):
    g = torch.Generator().manual_seed(ca + cb)
    a = _cl(torch.randn(3, ca, 5, 7, generator=g, dtype=torch.float64).to(dtype)).requires_grad_()
    b_src = _cl(torch.randn(3, 2 * cb, 5, 7, generator=g, dtype=torch.float64).to(dtype))
    b = b_src[:, cb:].detach().requires_grad_()  # a channel slice, as the attention output's buffer half can be
    out = cat_channels(a, b)
    want = torch.cat([a, b], dim=1)
    assert torch.equal(out, want) and out.is_contiguous(memory_format=torch.channels_last)
    grad = torch.randn(want.shape, generator=g, dtype=torch.float64).to(dtype)
    got_a, got_b = torch.autograd.grad(out, (a, b), grad)
    want_a, want_b = torch.autograd.grad(want, (a, b), grad)
    assert torch.equal(got_a, want_a) and torch.equal(got_b, want_b)


def test_other_layouts_take_torch_cat():
    a, b = torch.randn(2, 3, 4, 4), torch.randn(2, 5, 4, 4)  # NCHW: torch.cat itself
    out = cat_channels(a, b)
    assert torch.equal(out, torch.cat([a, b], 1)) and out.is_contiguous()
