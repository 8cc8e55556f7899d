"""A whole MSCREDNet trained with ``backend="fused"`` follows the loss curve of ``backend="reference"``.

Same initial weights, same batches, Adam lr 2e-4. On the CPU (Triton interpreter) a tiny float64 model must give the
same curve to rounding; on CUDA the full n = 30 model is trained 50 steps in float32 (TF32 off, so the only
differences are summation orders) and under bf16 autocast, where the fused curve must stay within 3x the reference's
own bf16 deviation from its float32 curve.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops.triton import convlstm as fused_convlstm

CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not fused_convlstm.is_available()[0],
                                reason=f"fused ops unavailable: {fused_convlstm.is_available()[1]}")


def _batches(steps, B, n, device, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(B, 5, 3, n, n, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
            for _ in range(steps)]


def _loss_curve(backend, cfg, batches, device, dtype, bf16=False, seed=0):
    torch.manual_seed(seed)
    net = MSCREDNet(ModelConfig(**{**cfg, "backend": backend})).to(device=device, dtype=dtype)
    opt = torch.optim.Adam(net.parameters(), lr=2e-4)
    losses = []
    for x in batches:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            recon = net(x)
        loss = F.mse_loss(recon.to(x.dtype), x[:, -1])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


def test_tiny_model_float64_same_curve_on_this_device():
    device = "cuda" if CUDA else "cpu"
    cfg = dict(n_sensors=6, channels=(3, 4, 4, 5), n_scales=3)
    batches = _batches(4, 2, 6, device, torch.float64)
    ref = _loss_curve("reference", cfg, batches, device, torch.float64)
    ours = _loss_curve("fused", cfg, batches, device, torch.float64)
    assert ref[-1] < ref[0]  # it trains at all
    torch.testing.assert_close(ours, ref, rtol=1e-9, atol=0)


@pytest.mark.skipif(not CUDA, reason="the 50-step full-size curves need a CUDA device")
def test_fifty_steps_float32_and_bf16_track_reference(strict_float32):
    cfg = dict(n_sensors=30)
    batches = _batches(50, 32, 30, "cuda", torch.float32, seed=1)
    ref32 = _loss_curve("reference", cfg, batches, "cuda", torch.float32)
    ours32 = _loss_curve("fused", cfg, batches, "cuda", torch.float32)
    assert ref32[-1] < 0.9 * ref32[0]
    rel32 = ((ours32 - ref32).abs() / ref32).max().item()
    assert rel32 < 1e-3, f"float32 curves differ by {rel32:.3g}"

    ref16 = _loss_curve("reference", cfg, batches, "cuda", torch.float32, bf16=True)
    ours16 = _loss_curve("fused", cfg, batches, "cuda", torch.float32, bf16=True)
    ref_dev = ((ref16 - ref32).abs() / ref32).max().item()
    our_dev = ((ours16 - ref32).abs() / ref32).max().item()
    assert our_dev <= 3 * ref_dev + 1e-3, f"bf16 fused deviates {our_dev:.3g}, reference bf16 {ref_dev:.3g}"
