"""The chunked CPU scoring forward (``ops/cpu_inference.py``) computes what the reference ops compute.

``MSCREDNet.forward_windows`` on a CPU without autograd (``cpu_inference.applies``) runs the windows in chunks, in
worker threads, channels-last, with the ConvLSTM gates through one sigmoid (tanh(x) = 2 sigmoid(2x) - 1, the g
block's weights doubled). Against the reference ops (MSCRED_CPU_CHUNKED=0): float64 to 1e-10 at any chunk size,
worker count, layout, ConvLSTM kernel and step count; float32 within float32 rounding, its error against the
float64 reference bounded by the reference ops' own. Elsewhere (autograd, autocast, the fused backend, other conv
backends, other devices) the path is not taken.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import cpu_inference
from mscred.train import predict


def _reference(net, seg, steps, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("MSCRED_CPU_CHUNKED", "0")
        with torch.no_grad():
            return net.forward_windows(seg, steps)


@pytest.mark.parametrize("n, S, steps, lstm_kernel", [(4, 9, 5, 2), (7, 17, 5, 3), (16, 14, 3, 2), (15, 23, 5, 2)])
@pytest.mark.parametrize("chunk, workers, fmt", [(1, 1, "cl"), (2, 2, "cl"), (3, 3, "nchw"), (7, 2, "cl"),
                                                 (None, None, "cl"), (64, 1, "nchw")])
def test_float64_equals_the_reference_ops(n, S, steps, lstm_kernel, chunk, workers, fmt, monkeypatch):
    torch.manual_seed(n + S)
    net = MSCREDNet(ModelConfig(n_sensors=n, channels=(3, 4, 5, 6), lstm_kernel=lstm_kernel)).double().eval()
    for p in net.parameters():  # larger weights than the init's: saturated and signed gates too
        p.data.mul_(3.0)
    seg = torch.rand(S, 3, n, n, dtype=torch.float64)
    ref = _reference(net, seg, steps, monkeypatch)
    memory_format = torch.channels_last if fmt == "cl" else torch.contiguous_format
    with torch.no_grad():
        ours = cpu_inference.forward_windows(net, seg, steps, chunk=chunk, fmt=memory_format, workers=workers)
    assert ours.shape == (S - steps + 1, 3, n, n)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("exact_tanh", ["0", "1"])
def test_float64_cell_switch_equals_the_reference_ops(exact_tanh, monkeypatch):
    """MSCRED_CPU_EXACT_TANH=1 (A/B runs: ATen's tanh in the cell) computes the same function."""
    torch.manual_seed(5)
    net = MSCREDNet(ModelConfig(n_sensors=9, channels=(3, 4, 5, 6))).double().eval()
    seg = torch.rand(12, 3, 9, 9, dtype=torch.float64)
    ref = _reference(net, seg, 5, monkeypatch)
    monkeypatch.setenv("MSCRED_CPU_EXACT_TANH", exact_tanh)
    with torch.no_grad():
        ours = cpu_inference.forward_windows(net, seg, 5, chunk=3)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [16, 30])
def test_float32_within_rounding_of_the_reference_ops(n, monkeypatch):
    """Default channels: max |ours - reference| / max |reference| <= 1e-5, and our error against the float64
    reference ops within 2x theirs (seen: 1.2-1.8x at 16, 30 and 55 sensors, fresh weights)."""
    torch.manual_seed(n)
    net = MSCREDNet(ModelConfig(n_sensors=n)).eval()
    seg = torch.rand(12, 3, n, n)
    ref = _reference(net, seg, 5, monkeypatch)
    with torch.no_grad():
        ours = net.forward_windows(seg, 5)
    exact = _reference(net.double(), seg.double(), 5, monkeypatch)
    scale = float(exact.abs().max())
    assert float((ours - ref).abs().max()) <= 1e-5 * scale
    ours_err = float((ours.double() - exact).abs().max())
    ref_err = float((ref.double() - exact).abs().max())
    assert ours_err <= 2 * ref_err + 1e-7 * scale


def test_taken_only_for_cpu_inference_of_the_reference_backend(monkeypatch):
    net = MSCREDNet(ModelConfig(n_sensors=5, channels=(3, 4, 4, 5))).eval()
    seg = torch.rand(7, 3, 5, 5)
    with torch.no_grad():
        assert cpu_inference.applies(net, seg)
        assert not cpu_inference.applies(net, seg.to("meta"))  # any other device (cuda: the GPU paths)
        assert not cpu_inference.applies(net, seg.half())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not cpu_inference.applies(net, seg)
        monkeypatch.setenv("MSCRED_CPU_CHUNKED", "0")
        assert not cpu_inference.applies(net, seg)
        monkeypatch.delenv("MSCRED_CPU_CHUNKED")
        for backend, conv_backend in (("fused", "torch"), ("reference", "im2col-global")):
            other = MSCREDNet(ModelConfig(n_sensors=5, channels=(3, 4, 4, 5), backend=backend,
                                          conv_backend=conv_backend))
            assert not cpu_inference.applies(other, seg)
    assert not cpu_inference.applies(net, seg)  # autograd on: the reference ops, unchanged


def test_autograd_keeps_the_reference_ops(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("chunked path taken with autograd on")

    monkeypatch.setattr(cpu_inference, "forward_windows", refuse)
    net = MSCREDNet(ModelConfig(n_sensors=5, channels=(3, 4, 4, 5)))
    out = net.forward_windows(torch.rand(7, 3, 5, 5), 5)
    assert out.requires_grad
    out.sum().backward()
    assert net.lstms[0].weight.grad is not None


def test_workers_restore_threads_and_keep_inference_mode(monkeypatch):
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=6, channels=(3, 4, 4, 5))).eval()
    seg = torch.rand(30, 3, 6, 6)
    ref = _reference(net, seg, 5, monkeypatch)
    threads = torch.get_num_threads()
    with torch.inference_mode():
        ours = cpu_inference.forward_windows(net, seg, 5, chunk=4, workers=3)
    assert ours.is_inference()
    assert torch.get_num_threads() == threads
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_a_worker_error_reaches_the_caller(monkeypatch):
    net = MSCREDNet(ModelConfig(n_sensors=6, channels=(3, 4, 4, 5))).eval()
    threads = torch.get_num_threads()

    def fail(*args, **kwargs):
        raise RuntimeError("worker failed")

    monkeypatch.setattr(cpu_inference, "_forward_range", fail)
    with torch.no_grad(), pytest.raises(RuntimeError, match="worker failed"):
        cpu_inference.forward_windows(net, torch.rand(30, 3, 6, 6), 5, chunk=4, workers=2)
    assert torch.get_num_threads() == threads


def test_chunk_and_worker_counts():
    net = MSCREDNet(ModelConfig(n_sensors=80))
    assert cpu_inference.chunk_windows(net, 80) == 2     # level 1's gates: 3.3 MB a window at 80 sensors
    assert cpu_inference.chunk_windows(net, 30) == cpu_inference.MAX_CHUNK
    assert cpu_inference.chunk_windows(net, 400) == 1
    assert cpu_inference.worker_count(1, 16) == 1
    assert 1 <= cpu_inference.worker_count(128, 16) <= min(torch.get_num_threads(), cpu_inference.MAX_WORKERS)


def test_predict_equals_the_reference_ops(monkeypatch):
    """``predict`` (batches of windows, each with its steps - 1 extra segments) as before, batch edges included."""
    torch.manual_seed(3)
    net = MSCREDNet(ModelConfig(n_sensors=8, channels=(4, 4, 6, 8))).eval()
    seg = np.random.default_rng(0).random((41, 3, 8, 8)).astype(np.float32)
    got = predict(net, seg, batch_size=9, device="cpu", steps=5)
    monkeypatch.setenv("MSCRED_CPU_CHUNKED", "0")
    ref = predict(net, seg, batch_size=9, device="cpu", steps=5)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_a_bf16_model_scores_in_float32_on_a_cpu(monkeypatch):
    """A model trained with --bf16 scored under CPU bf16 autocast (the reference ops, this path not taken): as slow
    as float32 here at 30 sensors and 2x slower at 80 (results/cpu_forward/bf16.md), with ~1e4 x the error. predict
    now leaves autocast off where this path scores, so the result is float32's; bf16_native is forced, so that the
    test also bites on CPUs without native bf16 (where autocast is a no-op anyway)."""
    import mscred.train_graphs as train_graphs

    monkeypatch.setattr(train_graphs, "bf16_native", lambda device: True)
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=6, channels=(3, 4, 5, 6))).eval()
    seg = np.random.default_rng(0).random((12, 3, 6, 6), dtype=np.float32)
    plain = predict(net, seg, 4, "cpu", bf16=False)
    np.testing.assert_array_equal(predict(net, seg, 4, "cpu", bf16=True), plain)
    monkeypatch.setenv("MSCRED_CPU_CHUNKED", "0")   # the reference ops: bf16 autocast as before
    assert not np.array_equal(predict(net, seg, 4, "cpu", bf16=True), plain)
