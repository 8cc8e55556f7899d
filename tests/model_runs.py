"""Training steps the model-level tests share: the fused model's step run under different switches by the tests that
compare them (test_encoder_xh.py, test_attention_cat.py, test_interleaved_levels.py, ...), and a small CPU step for the
interpreter's bf16 (test_interpreter_bf16.py and benchmarks/interpreter_bf16_errors.py). Two comparisons of two runs:
``assert_same_step`` where the arithmetic is the same (bit for bit on the CPU), ``assert_step_close`` where it is not
(test_strided_conv.py, test_wgrad_split.py)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


# The levels' channels of a step under the CPU's Triton interpreter, whose time grows with them: a quarter of the
# model's (32, 64, 128, 256) -- the same kernels and paths, a training step's test in seconds instead of tens.
CPU_CHANNELS = (8, 16, 32, 64)


def step_channels(device: str) -> tuple[int, int, int, int]:
    """The levels' channels of ``fused_training_step`` without ``channels``: ``CPU_CHANNELS`` or the model's."""
    from mscred.config import ModelConfig

    return CPU_CHANNELS if device == "cpu" else tuple(ModelConfig().channels)


def fused_training_step(n: int, B: int, autocast: Callable, device: str, seed: int = 0,
                        channels: tuple[int, int, int, int] | None = None) -> Callable:
    """``run()``: one forward and backward of a fused MSCREDNet for ``n`` sensors on a fixed batch of B windows (the
    same weights and data at every call), under the context ``autocast()``; returns (loss, {name: gradient}).
    ``channels``: the levels' channel counts, if not the model's default on a GPU or ``CPU_CHANNELS`` on the CPU
    (smaller ones keep the interpreter's runs short)."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    torch.manual_seed(seed)
    extra = {"channels": channels or step_channels(device)}
    net = MSCREDNet(ModelConfig(n_sensors=n, backend="fused", **extra)).to(device)
    x = torch.rand(B, 5, 3, n, n, device=device)

    def run():
        net.zero_grad(set_to_none=True)
        with autocast():
            loss = F.mse_loss(net(x).float(), x[:, -1])
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters()}
    return run


def off_and_on(run: Callable, monkeypatch, variable: str, module=None, name: str | None = None):
    """(``run()`` with the switch ``variable`` = 0, ``run()`` with it = 1, what ``module.name`` returned at each of
    its calls in the second run -- empty without a ``module``): a switch's two runs, and a look at whether its path
    was taken."""
    monkeypatch.setenv(variable, "0")
    ref = run()
    monkeypatch.setenv(variable, "1")
    results = []
    if module is not None:
        real = getattr(module, name)

        def recorded(*args):
            result = real(*args)
            results.append(result)
            return result
        monkeypatch.setattr(module, name, recorded)
    return ref, run(), results


def small_cpu_step(backend: str, bf16: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(loss, {name: gradient}) of one training step of a small MSCREDNet (n = 12, channels 4/8/8/16) on a fixed
    CPU batch, under bf16 autocast or in float32: the interpreter's bf16 test and its benchmark
    (benchmarks/interpreter_bf16_errors.py) run the same step."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=12, backend=backend, channels=(4, 8, 8, 16)))
    x = torch.rand(2, 5, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = F.mse_loss(net(x).float(), x[:, -1])
    loss.backward()
    return loss.detach(), {k: p.grad for k, p in net.named_parameters()}


def assert_same_step(ours: tuple, ref: tuple, bf16: bool = False) -> None:
    """Two runs' (loss, {name: gradient}) the same: bit for bit on the CPU, where the interpreter runs every kernel in
    one order; on CUDA to rounding, as the same arithmetic can round differently there: the small convolutions'
    weight and bias gradients are sums of atomic adds in arrival order, and cuDNN picks its algorithms by the
    tensors' strides and addresses (float32 to 1e-4, bf16 to 2e-2, relative)."""
    assert_same_tensors([ours[0], *ours[1].values()], [ref[0], *ref[1].values()], ["loss", *ref[1]], bf16)


def assert_same_tensors(got: list, want: list, names: list, bf16: bool = False) -> None:
    """``assert_same_step``'s comparison for lists of tensors (named for the messages)."""
    assert len(got) == len(want) == len(names)
    for g, w, name in zip(got, want, names):
        if g.device.type == "cpu":
            assert torch.equal(g, w), name
        else:
            torch.testing.assert_close(g, w, rtol=2e-2 if bf16 else 1e-4, atol=1e-6, msg=lambda m, k=name: f"{k}: {m}")


def assert_step_close(ours: tuple, ref: tuple, bf16: bool) -> None:
    """Two training steps' (loss, {name: gradient}) to rounding, where the arithmetic differs (another kernel sums in
    another order; in bf16 each layer's rounding reaches the gradients before it): bf16 2e-2 relative, float32
    1e-4, the absolute part a share of each tensor's largest magnitude (2e-3 / 1e-5)."""
    rtol, atol = (2e-2, 2e-3) if bf16 else (1e-4, 1e-5)
    for name, got, want in zip(["loss", *ref[1]], [ours[0], *ours[1].values()], [ref[0], *ref[1].values()]):
        scale = want.abs().max().item() + 1e-12
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol * scale, msg=lambda m, k=name: f"{k}: {m}")
