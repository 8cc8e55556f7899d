"""ops/triton/window_loss.py: the training step's per-window MSE, fused forward and backward, against the PyTorch-ops
definition (float64, and bf16 reconstructions against their float64 value), through strides as the model hands them
over (a channels-last reconstruction, the target a step of the windows tensor)."""
from __future__ import annotations

import pytest
import torch

from mscred.ops.triton import window_loss

pytestmark = pytest.mark.skipif(not window_loss.runs_fused(torch.empty(0, device="cuda" if torch.cuda.is_available()
                                                                        else "cpu")),
                                reason="no Triton kernels here (no CUDA device, interpreter off)")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(B, K, n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    recon = torch.randn(B, K, n, n, generator=g, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    windows = torch.randn(B, 5, K, n, n, generator=g, dtype=torch.float64)
    dloss = torch.randn(B, generator=g, dtype=torch.float64)
    return recon.to(DEVICE, dtype), windows.to(DEVICE)[:, -1], dloss.to(DEVICE)


@pytest.mark.parametrize("B, K, n", [(1, 3, 5), (3, 3, 7), (7, 2, 30), (2, 1, 33)])
def test_float64_equals_reference_with_gradients(B, K, n):
    recon, target, dloss = _inputs(B, K, n, torch.float64, seed=B * n + K)
    results = []
    for fn in (window_loss.window_mse, window_loss.reference):
        r, t = recon.clone().requires_grad_(), target.clone().requires_grad_()
        losses = fn(r, t)
        results.append((losses, *torch.autograd.grad(losses, (r, t), dloss)))
    for name, got, want in zip(("losses", "drecon", "dtarget"), *results):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14, msg=name)
    assert results[0][1].is_contiguous()  # NCHW planes, what deconv1's backward reads fastest


@pytest.mark.parametrize("B, K, n", [(1, 3, 5), (7, 2, 30)])
def test_weighted_float64_equals_reference_with_gradients(B, K, n):
    """The weight's product inside the kernels: losses, and every gradient (the weight's too), as the PyTorch ops."""
    recon, target, dloss = _inputs(B, K, n, torch.float64, seed=B * n + K + 1)
    weight = torch.rand(B, dtype=torch.float64, device=DEVICE) + 0.5
    results = []
    for fn in (window_loss.window_mse, window_loss.reference):
        r, t, w = (v.clone().requires_grad_() for v in (recon, target, weight))
        losses = fn(r, t, w)
        results.append((losses, *torch.autograd.grad(losses, (r, t, w), dloss)))
    for name, got, want in zip(("losses", "drecon", "dtarget", "dweight"), *results):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14, msg=name)


def test_weighted_sum_bit_equal_to_the_product_after():
    """The training step's loss, sum(window_mse(r, t, w)), is bit for bit sum(window_mse(r, t) * w) in the bf16
    step's dtypes (bf16 reconstruction, float32 target and weights 1/b), and so is its gradient: the product moved
    into the kernels, not changed."""
    recon, target, _ = _inputs(6, 3, 30, torch.bfloat16, seed=11)
    target = target.float()
    weight = torch.full((6,), 1.0 / 6, device=DEVICE)
    weight[-1] = 0.0  # a padded row, as the graphed step's last partial batch has
    results = []
    for loss_of in (lambda r: window_loss.window_mse(r, target, weight).sum(),
                    lambda r: (window_loss.window_mse(r, target) * weight).sum()):
        r = recon.clone().requires_grad_()
        loss = loss_of(r)
        results.append((loss, *torch.autograd.grad(loss, r)))
    for name, got, want in zip(("loss", "drecon"), *results):
        assert torch.equal(got, want), name
    assert torch.count_nonzero(results[0][1][-1]) == 0  # the padded row gets no gradient


def test_bf16_reconstruction_in_float32():
    """bf16 recon (autocast) against a float32 target: float32 losses, bf16 gradient, both at their rounding."""
    recon, target, dloss = _inputs(5, 3, 30, torch.bfloat16, seed=3)
    target, dloss = target.float(), dloss.float()
    r = recon.clone().requires_grad_()
    losses = window_loss.window_mse(r, target)
    (dr,) = torch.autograd.grad(losses, r, dloss)
    want = window_loss.reference(recon.double(), target.double())
    assert losses.dtype == torch.float32 and dr.dtype == torch.bfloat16
    torch.testing.assert_close(losses.double(), want, rtol=1e-5, atol=0)
    want_dr = dloss.double()[:, None, None, None] * 2 / recon[0].numel() * (recon.double() - target.double())
    torch.testing.assert_close(dr.double(), want_dr, rtol=2 ** -7, atol=1e-6)


def test_opcheck():
    recon, target, dloss = _inputs(3, 3, 6, torch.float64, seed=1)
    recon.requires_grad_()
    torch.library.opcheck(window_loss.window_mse_fused, (recon, target),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    torch.library.opcheck(window_loss.window_mse_fused_backward, (dloss, recon.detach(), target),
                          test_utils=("test_schema", "test_faketensor"))
    weight = dloss.abs()
    torch.library.opcheck(window_loss.window_mse_fused, (recon, target, weight),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    torch.library.opcheck(window_loss.window_mse_fused_backward, (dloss, recon.detach(), target, weight),
                          test_utils=("test_schema", "test_faketensor"))
