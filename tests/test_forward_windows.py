"""Scoring consecutive windows with shared segments: ``MSCREDNet.forward_windows`` and the fused ConvLSTM's
once-per-segment input convolutions equal the per-window computation; ``predict`` gives what it gave before.

On a CPU machine conftest.py switches Triton's interpreter on, so the fused backend runs its kernels here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import reference
from mscred.ops.convlstm_sliding import convlstm_sliding
from mscred.ops.convlstm_sliding import sliding as is_sliding
from mscred.ops.triton import convlstm as fused
from mscred.train import WindowDataset, predict
from mscred.train_graphs import forward_losses

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _windows(seg, steps):
    return torch.stack([seg[k:k + steps] for k in range(seg.shape[0] - steps + 1)])


@pytest.mark.parametrize("backend", ["reference", "fused"])
@pytest.mark.parametrize("n, S, steps", [(4, 5, 5), (7, 9, 5), (9, 12, 3), (16, 8, 5)])
def test_forward_windows_equals_forward_of_the_stacked_windows(backend, n, S, steps):
    torch.manual_seed(n + S)
    net = MSCREDNet(ModelConfig(n_sensors=n, channels=(3, 4, 4, 5), backend=backend)).double().to(DEVICE)
    seg = torch.rand(S, 3, n, n, dtype=torch.float64, device=DEVICE)
    with torch.no_grad():
        ours = net.forward_windows(seg, steps)
        ref = net(_windows(seg, steps))
    assert ours.shape == (S - steps + 1, 3, n, n)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(not fused.is_available()[0], reason=f"fused ops unavailable: {fused.is_available()[1]}")
@pytest.mark.parametrize("k, n", [(2, 5), (2, 16), (3, 7)])
def test_fused_convlstm_convolves_each_distinct_step_once(monkeypatch, k, n):
    """The fused op on sliding windows (stride(0) == stride(1)) convolves S = B + T - 1 images once, and gives the
    states of the copied windows (float64, k = 2 with and without the padded copy, k = 3)."""
    g = torch.Generator().manual_seed(k + n)
    C, T, S = 4, 5, 9
    f = torch.randn(S, C, n, n, generator=g, dtype=torch.float64).to(DEVICE)
    w = (torch.randn(4 * C, 2 * C, k, k, generator=g, dtype=torch.float64) * 0.3).to(DEVICE)
    b = torch.randn(4 * C, generator=g, dtype=torch.float64).to(DEVICE)
    B = S - T + 1
    sliding = f.as_strided((B, T, C, n, n), (f.stride(0), *f.stride()))
    assert is_sliding(sliding)
    seen = []
    real = fused.input_gates
    monkeypatch.setattr(fused, "input_gates", lambda x4, *a: seen.append(x4.shape[0]) or real(x4, *a))
    with torch.no_grad():
        ours = fused.convlstm(sliding, w, b, 1.0)
        ref = fused.convlstm(sliding.contiguous(), w, b, 1.0)
    assert seen == [S, B * T]  # shared: the S distinct steps; copied windows: every (window, step)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)


def test_predict_matches_the_per_window_forward():
    """predict (eager: forward_windows over batches of consecutive windows, each batch with its steps - 1 extra
    segments) equals the per-window forward, batch boundaries included."""
    torch.manual_seed(1)
    net = MSCREDNet(ModelConfig(n_sensors=6, channels=(3, 4, 4, 5))).eval()
    seg = np.random.default_rng(0).random((23, 3, 6, 6), dtype=np.float64).astype(np.float32)
    got = predict(net, seg, batch_size=7, device="cpu", steps=5)
    data = WindowDataset(seg, 5)
    with torch.no_grad():
        ref, _ = forward_losses(net, data.batch(torch.arange(len(data))), False)
    assert got.shape == (19, 3, 6, 6)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-6)


def test_forward_windows_refuses_too_few_segments():
    net = MSCREDNet(ModelConfig(n_sensors=4, channels=(3, 4, 4, 5)))
    with pytest.raises(ValueError, match="S >= steps"):
        net.forward_windows(torch.zeros(3, 3, 4, 4), 5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the full-size bf16 row needs a CUDA device")
def test_full_size_bf16_on_gpu():
    """n = 30, 128 windows, fused backend under bf16 autocast: the shared path against the per-window forward."""
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda().eval()
    seg = torch.rand(132, 3, 30, 30, device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        ours = net.forward_windows(seg, 5).float()
        ref = net(_windows(seg, 5)).float()
    err = ((ours - ref).norm() / ref.norm()).item()
    assert err < 2e-2, f"shared-segment bf16 output differs by {err:.3g}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA-graph capture needs a CUDA device")
@pytest.mark.parametrize("bf16", [False, True])
def test_graphed_window_inference_replays_forward_windows(bf16, strict_float32):
    """GraphedWindowInference (one graph of forward_windows) against the eager forward_windows, full batches and a
    partial last one."""
    from mscred.train_graphs import GraphedWindowInference, autocast
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda().eval()
    data = WindowDataset(torch.rand(44, 3, 30, 30, device="cuda"), 5)  # 40 windows
    infer = GraphedWindowInference(net, data, 16, bf16)
    for start, b in ((0, 16), (16, 16), (32, 8)):
        got = infer(start, b).clone()
        with torch.no_grad(), autocast(torch.device("cuda"), bf16):
            ref = net.forward_windows(data.segments[start:start + b + 4], 5).float()
        tol = 2e-2 if bf16 else 1e-5
        err = ((got - ref).norm() / ref.norm()).item()
        assert got.shape == (b, 3, 30, 30) and err < tol, f"windows {start}..: {err:.3g}"


def test_graphed_window_inference_needs_cuda_or_refuses_bad_batches():
    from mscred.train_graphs import GraphedWindowInference
    data = WindowDataset(torch.rand(8, 3, 4, 4), 5)  # 4 windows
    with pytest.raises(ValueError, match=r"batch_size must be in \[1, 4\]"):
        GraphedWindowInference(MSCREDNet(ModelConfig(n_sensors=4, channels=(3, 4, 4, 5))), data, 5)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("windows", [True, False])
def test_convlstm_sliding_equals_the_reference(k, windows):
    """ops.convlstm_sliding (hoisted input convolution, once per distinct step on sliding windows) against the
    textbook reference ConvLSTM, float64, hidden size different from the input channels."""
    g = torch.Generator().manual_seed(k)
    C, Ch, T, n = 3, 5, 5, 7
    f = torch.randn(10, C, n, n, generator=g, dtype=torch.float64)
    x = f.as_strided((6, T, C, n, n), (f.stride(0), *f.stride())) if windows else torch.randn(
        4, T, C, n, n, generator=g, dtype=torch.float64)
    assert is_sliding(x) == windows
    w = torch.randn(4 * Ch, C + Ch, k, k, generator=g, dtype=torch.float64) * 0.3
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64)
    torch.testing.assert_close(convlstm_sliding(x, w, b, 1.0), reference.convlstm(x, w, b, 1.0), rtol=1e-12,
                               atol=1e-12)


def test_fused_scoring_writes_the_skip_connections_in_place(monkeypatch, strict_float32):
    """The fused backend's forward_windows writes the attention outputs of levels 1-3 and the decoder's outputs
    into the concatenation buffers (no torch.cat): float32 (no TF32 on a GPU), equal to the reference backend's
    forward_windows with the same weights."""
    torch.manual_seed(3)
    cfg = ModelConfig(n_sensors=9, channels=(4, 8, 8, 16), backend="fused")
    net = MSCREDNet(cfg).to(DEVICE)
    ref_net = MSCREDNet(ModelConfig(n_sensors=9, channels=(4, 8, 8, 16), backend="reference")).to(DEVICE)
    ref_net.load_state_dict(net.state_dict())
    seg = torch.rand(10, 3, 9, 9, device=DEVICE)
    cats = []
    real_cat = torch.cat
    monkeypatch.setattr(torch, "cat", lambda *a, **k: cats.append(1) or real_cat(*a, **k))
    with torch.no_grad():
        ours = net.forward_windows(seg, 5)
    assert cats == []
    monkeypatch.setattr(torch, "cat", real_cat)
    with torch.no_grad():
        expect = ref_net.forward_windows(seg, 5)
    torch.testing.assert_close(ours, expect, rtol=1e-4, atol=1e-5)


def test_skip_buffers_switch_concatenates_again(monkeypatch, strict_float32):
    """MSCRED_SKIP_BUFFERS=0 (A/B runs) takes the concatenating decoder in the fused forward_windows (float32, no
    TF32 on a GPU: with it the two sides differed by up to 4e-5 on the H200)."""
    torch.manual_seed(4)
    net = MSCREDNet(ModelConfig(n_sensors=6, channels=(4, 4, 8, 8), backend="fused")).to(DEVICE)
    seg = torch.rand(7, 3, 6, 6, device=DEVICE)
    with torch.no_grad():
        in_place = net.forward_windows(seg, 5)
    monkeypatch.setenv("MSCRED_SKIP_BUFFERS", "0")
    cats, real_cat = [], torch.cat
    monkeypatch.setattr(torch, "cat", lambda *a, **k: cats.append(1) or real_cat(*a, **k))
    with torch.no_grad():
        concatenated = net.forward_windows(seg, 5)
    assert len(cats) == 3
    torch.testing.assert_close(in_place, concatenated, rtol=1e-6, atol=1e-6)
