"""A training step of the fused model, run twice under different switches by the tests that compare them
(test_encoder_xh.py, test_attention_cat.py)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


def fused_training_step(n: int, B: int, autocast: Callable, device: str, seed: int = 0) -> Callable:
    """``run()``: one forward and backward of a fused MSCREDNet for ``n`` sensors on a fixed batch of B windows (the
    same weights and data at every call), under the context ``autocast()``; returns (loss, {name: gradient})."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    torch.manual_seed(seed)
    net = MSCREDNet(ModelConfig(n_sensors=n, backend="fused")).to(device)
    x = torch.rand(B, 5, 3, n, n, device=device)

    def run():
        net.zero_grad(set_to_none=True)
        with autocast():
            loss = F.mse_loss(net(x).float(), x[:, -1])
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters()}
    return run
