"""ops/weight_cache.py: every weight cast of the fused bf16 training step in one pass each way.

The casts are the same values in the same layouts as the per-weight casts they replace, so the whole model's loss
and every gradient must come out bit for bit the same with the cache on and off (MSCRED_WEIGHT_CACHE=0); and the
plan must be a permutation of the masters' elements."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import weight_cache
from mscred.ops.triton.runtime import runs_fused


def test_plan_is_a_permutation_and_the_casts_are_the_weights():
    a = torch.randn(8, 5, 2, 2, requires_grad=True)   # a gate weight: input half 3 channels, recurrent half 2
    b = torch.randn(4, 3, 3, 3, requires_grad=True)   # a whole convolution weight
    targets = [(b, "all", 0), (a, "x", 3), (a, "h", 3)]
    plan = weight_cache.plan_for(targets)
    assert weight_cache.plan_for(targets, plan) is plan  # reused for the same weights
    assert weight_cache.plan_for([(b, "all", 0)], plan) is not plan
    with weight_cache.cast_once(targets, plan, torch.float64):
        whole, wx, wh = (weight_cache.lookup(b), weight_cache.lookup(a, "x"), weight_cache.lookup(a, "h"))
        assert weight_cache.lookup(torch.zeros(1)) is None
    assert weight_cache.lookup(b) is None  # only inside the block
    for got, want in ((whole, b), (wx, a[:, :3]), (wh, a[:, 3:])):
        assert got.dtype == torch.float64 and got.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(got, want.double())
    g = [torch.randn(t.shape, dtype=torch.float64) for t in (whole, wx, wh)]
    ga, gb = torch.autograd.grad(sum((t * gt).sum() for t, gt in zip((whole, wx, wh), g)), (a, b))
    assert ga.dtype == torch.float32 and ga.is_contiguous()
    assert torch.equal(gb, g[0].float()) and torch.equal(ga, torch.cat([g[1], g[2]], 1).float())


def test_targets_must_cover_each_master_once():
    a = torch.randn(8, 5, 2, 2)
    with pytest.raises(ValueError, match="exactly once"):
        weight_cache.plan_for([(a, "x", 3)])


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                    reason="the fused training layout needs the Triton kernels (CUDA, or the CPU interpreter)")
# The interpreter computes the kernels' exp in numpy, which warns where it overflows to inf -- in SELU's branch
# that tl.where does not take, or a sigmoid's saturated tail, 1 / (1 + inf) = 0: a warning, not a wrong value.
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_model_bf16_step_is_the_same_with_and_without_the_cache(monkeypatch):
    """The whole model's output and gradients with the cache and without (``_same_step``)."""
    x = torch.rand(2, 5, 3, 10, 10, device=DEVICE)
    results, calls = [], []
    real = weight_cache.cast_once
    monkeypatch.setattr(weight_cache, "cast_once", lambda *a: calls.append(1) or real(*a))
    for switch in ("1", "0"):
        monkeypatch.setenv("MSCRED_WEIGHT_CACHE", switch)
        results.append(_small_bf16_step(x))
    assert calls == [1]  # on, then off
    _same_step(*results)


def _small_bf16_step(x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A small fused model's bf16 forward and backward on ``x`` from seed 0: (output, every parameter's gradient)."""
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=10, channels=(4, 8, 8, 16), backend="fused")).to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = net(x)
    F.mse_loss(out.float(), x[:, -1]).backward()
    return out.detach(), {k: p.grad for k, p in net.named_parameters()}


def _same_step(a, b) -> None:
    """Two ``_small_bf16_step`` results alike: bit for bit on the CPU interpreter; on CUDA cuDNN may pick other
    algorithms between the two nets, so there to the bf16 rounding of the outputs and weight gradients."""
    (out_a, g_a), (out_b, g_b) = a, b
    tol = dict(rtol=0, atol=0) if DEVICE == "cpu" else dict(rtol=2e-2, atol=1e-4)
    torch.testing.assert_close(out_a, out_b, **tol)
    for k in g_a:
        assert g_a[k].dtype == torch.float32, k
        torch.testing.assert_close(g_a[k], g_b[k], **tol, msg=k)


@pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                    reason="the masters are packed only where the gather kernel runs (CUDA, or the CPU interpreter)")
def test_plan_packs_the_masters_and_the_kernel_reads_them_in_place(monkeypatch, tmp_path):
    """The first plan makes the float32 masters views of one buffer in its order (values unchanged); the casts and
    gradients then come from one transposing kernel each way, the same bits as the PyTorch ops' path, which still serves
    a master replaced later; MSCRED_WEIGHT_PACK=0 leaves the masters alone; the packed weights save."""
    torch.manual_seed(0)
    a = torch.randn(8, 5, 2, 2, device=DEVICE, requires_grad=True)
    b = torch.randn(4, 3, 3, 3, device=DEVICE, requires_grad=True)
    values = (a.detach().clone(), b.detach().clone())
    targets = [(b, "all", 0), (a, "x", 3), (a, "h", 3)]
    monkeypatch.setenv("MSCRED_WEIGHT_PACK", "0")
    assert weight_cache.plan_for(targets).packed is None and a.data_ptr() != b.data_ptr() + b.numel() * 4
    monkeypatch.delenv("MSCRED_WEIGHT_PACK")
    plan = weight_cache.plan_for(targets)
    assert plan.packed is not None and plan.packed.numel() == a.numel() + b.numel()
    assert b.data_ptr() == plan.packed.data_ptr() and a.data_ptr() == plan.packed.data_ptr() + b.numel() * 4
    assert torch.equal(a.detach(), values[0]) and torch.equal(b.detach(), values[1]) and a.is_leaf

    reads = []
    real = weight_cache.transpose_blocks
    monkeypatch.setattr(weight_cache, "transpose_blocks",
                        lambda src, *r, **k: reads.append(src is plan.packed) or real(src, *r, **k))
    real_parts = weight_cache.transpose_parts
    monkeypatch.setattr(weight_cache, "transpose_parts", lambda *a: reads.append("parts") or real_parts(*a))
    g = [torch.randn(t, device=DEVICE).to(torch.bfloat16) for t in ((4, 3, 3, 3), (8, 3, 2, 2), (8, 2, 2, 2))]
    results = []
    for replaced in (False, True):
        if replaced:  # a master given new storage: no longer packed, the PyTorch ops' path
            a.data = a.data.clone()
            assert not plan.reads_packed([b, a])
        a.grad = b.grad = None
        with weight_cache.cast_once(targets, plan, torch.bfloat16):
            casts = (weight_cache.lookup(b), weight_cache.lookup(a, "x"), weight_cache.lookup(a, "h"))
        for got, want in zip(casts, (b, a[:, :3], a[:, 3:])):
            assert torch.equal(got, want.detach().to(torch.bfloat16))
        sum((t.float() * gt.float()).sum() for t, gt in zip(casts, g)).backward()
        results.append((a.grad.clone(), b.grad.clone()))
    # forward from the masters in place; the backward's transposes each time, reading the gradients in place
    assert reads == [True, "parts", "parts"]
    for (ga, gb) in results:
        assert torch.equal(gb, g[0].float()) and torch.equal(ga, torch.cat([g[1], g[2]], 1).float())

    from mscred.atomic import save_safetensors
    from mscred.model import cpu_state
    net = torch.nn.Module()
    net.b, net.c = torch.nn.Parameter(torch.randn(4, 3, 3, 3, device=DEVICE)), torch.nn.Parameter(
        torch.randn(6, 2, 2, 2, device=DEVICE))
    weight_cache.plan_for([(net.b, "all", 0), (net.c, "all", 0)])  # packed: the two share one storage
    save_safetensors(cpu_state(net), tmp_path / "w.safetensors")


@pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                    reason="the gradients are read in place only where the kernels run (CUDA, or the interpreter)")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_gradients_read_in_place_are_the_concatenations(monkeypatch):
    """By default the backward reads the targets' gradients where they lie
    (``transpose_parts``) instead of concatenating them first; every master gradient the same (bit for bit on the
    CPU interpreter)."""
    x = torch.rand(2, 5, 3, 10, 10, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    results, calls = [], []
    real = weight_cache.transpose_parts
    monkeypatch.setattr(weight_cache, "transpose_parts", lambda *a: calls.append(len(a[0])) or real(*a))
    monkeypatch.delenv("MSCRED_WEIGHT_GRAD_PARTS", raising=False)
    results.append(_small_bf16_step(x))
    monkeypatch.setenv("MSCRED_WEIGHT_GRAD_PARTS", "0")
    results.append(_small_bf16_step(x))
    assert calls == [16]  # on (the default): the 16 targets' gradients read in place; =0: concatenated
    _same_step(*results)


@pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                    reason="the fused training layout needs the Triton kernels (CUDA, or the CPU interpreter)")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_every_gradient_arrives_in_its_casts_layout(monkeypatch):
    """The backward reads each target's gradient in place only where it comes in the cast's channels-last layout;
    one that does not costs a copy first. conv1's and deconv1's weight gradients (the small convolution's, whose
    output followed the weight's NCHW order before) cost 2.0 and 2.8 us at the graphed step's tail
    (results/next_1206/timeline/); every one comes channels-last now."""
    layouts = []
    real = weight_cache._CastAll.backward

    def spy(ctx, *grads):
        layouts.extend(g is None or g.permute(0, 2, 3, 1).is_contiguous() for g in grads)
        return real(ctx, *grads)
    monkeypatch.setattr(weight_cache._CastAll, "backward", staticmethod(spy))
    _small_bf16_step(torch.rand(2, 5, 3, 10, 10, device=DEVICE))
    assert len(layouts) == 16 and all(layouts)
