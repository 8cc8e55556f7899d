"""A ConvLSTM level and its temporal attention in one kernel (``ops/lstm_attention.py``, the resident kernel's
``forward_attention``): bf16 inference of levels 1-2.

On the CPU: where it declines (so the two-kernel path runs), which outputs it writes in place, and that its step
bound is the kernel header's. On a CUDA machine: against the float64 oracle (``reference.temporal_attention`` of
``reference.convlstm``) within twice the bf16 reference's error, and against the two kernels it replaces (the same
bf16 maps, the attention summed in another order), at the model's shapes and awkward ones (1 to 5 steps,
batches below and above the SM count so that blocks reuse their scratch slot, a single pixel); into a channel
slice of the decoder's concatenation buffer, leaving the other half alone; replayed from a CUDA graph; and the whole
model's scoring with it on and off.
"""
from __future__ import annotations

import re

import pytest
import torch

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import reference as ref
from mscred.ops import resident_lstm
from mscred.ops.lstm_attention import resident_attention
from mscred.ops.triton import attention as fused_attention
from mscred.ops.triton import convlstm as fused

CUDA = torch.cuda.is_available()
FB = 1.0
needs_cuda = pytest.mark.skipif(not CUDA, reason="the resident kernel runs on a CUDA device only (compiled in CI)")


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    for switch in ("MSCRED_RESIDENT_LSTM", "MSCRED_RESIDENT_ATTENTION", "MSCRED_FUSED_LAYOUT"):
        monkeypatch.delenv(switch, raising=False)


# ----------------------------------------------------------------------------------------------------------------
# CPU
# ----------------------------------------------------------------------------------------------------------------
def test_step_bound_is_the_headers():
    header = (resident_lstm._SRC / "resident_lstm.h").read_text()
    assert int(re.search(r"constexpr int kMaxAttentionSteps = (\d+);", header).group(1)) == \
        resident_lstm.MAX_ATTENTION_STEPS


def test_declines_on_the_cpu():
    x = torch.randn(2, 5, 32, 6, 6, dtype=torch.bfloat16)
    w = torch.randn(128, 64, 2, 2, dtype=torch.bfloat16)
    assert resident_attention(x, w, torch.zeros(128), FB) is None


def test_outputs_it_writes_in_place():
    """Channels contiguous, the pixels at one stride in multiples of 8, bf16: a dense channels-last map, or the
    attention half of the decoder's (B, 2Ch, H, W) channels-last concatenation buffer."""
    cl = torch.channels_last
    dense = torch.empty(4, 32, 5, 5, dtype=torch.bfloat16, memory_format=cl)
    half = torch.empty(4, 64, 5, 5, dtype=torch.bfloat16, memory_format=cl)[:, 32:]
    assert resident_lstm.attention_output_fits(dense) and resident_lstm.attention_output_fits(half)
    assert not resident_lstm.attention_output_fits(torch.empty(4, 32, 5, 5, dtype=torch.bfloat16))  # NCHW
    assert not resident_lstm.attention_output_fits(dense.float())
    assert not resident_lstm.attention_output_fits(
        torch.empty(4, 36, 5, 5, dtype=torch.bfloat16, memory_format=cl)[:, 4:])  # pixels 36 apart, data +8 bytes
    assert not resident_lstm.attention_output_fits(dense[:, :, :, :4])  # rows not W pixels apart


# ----------------------------------------------------------------------------------------------------------------
# On the GPU
# ----------------------------------------------------------------------------------------------------------------
def _inputs(B, T, Ch, n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, Ch, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * Ch, 2 * Ch, 2, 2, generator=g, dtype=torch.float64) / (2 * (2 * Ch) ** 0.5)
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64) * 0.5
    return [t.to("cuda") for t in (x, w, b)]


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm()).item()


def _skip_unless_it_runs(ch, n):
    if not resident_lstm.runs(torch.bfloat16, "nhwc", False, ch, 2, n * n, torch.device("cuda")):
        pytest.skip(f"the resident kernel does not run here for {ch} channels at {n} x {n} (shared memory, or build)")


def _two_kernels(x, w, b):
    """The path it replaces: the resident kernel's every h_t, then the Triton attention kernel."""
    with torch.no_grad():
        return fused_attention.temporal_attention(fused.convlstm(x, w, b, FB))


@needs_cuda
@pytest.mark.parametrize("B, T, Ch, n", [(128, 5, 32, 30), (128, 5, 64, 15), (300, 5, 32, 30), (140, 5, 64, 15),
                                         (7, 1, 32, 5), (5, 2, 64, 9), (3, 3, 32, 13), (140, 5, 64, 16),
                                         (2, 5, 32, 32), (1, 5, 32, 1), (133, 4, 64, 11)])
def test_against_float64_oracle_and_the_two_kernels(B, T, Ch, n):
    _skip_unless_it_runs(Ch, n)
    x, w, b = _inputs(B, T, Ch, n, seed=B + 10 * T + Ch + n)
    oracle = ref.temporal_attention(ref.convlstm(x, w, b, FB))
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    yardstick = _rel(ref.temporal_attention(ref.convlstm(*low, FB)), oracle)
    with torch.no_grad():
        got = resident_attention(*low, FB)
    assert got is not None and got.dtype == torch.bfloat16 and got.shape == oracle.shape
    assert got.is_contiguous(memory_format=torch.channels_last) and torch.isfinite(got).all()
    assert _rel(got, oracle) <= 2 * yardstick + 1e-3, (_rel(got, oracle), yardstick)
    assert _rel(got, _two_kernels(*low)) <= 2e-3


@needs_cuda
def test_sliding_windows_into_the_decoders_buffer():
    """Scoring's call: sliding windows of shared steps, the output written into the attention half of a channels-
    last (B, 2Ch, H, W) buffer, the other half left as it was."""
    B, T, Ch, n = 300, 5, 32, 30
    _skip_unless_it_runs(Ch, n)
    x, w, b = _inputs(B + T - 1, 1, Ch, n, seed=3)
    steps = x[:, 0].to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    windows = steps.as_strided((B, T, Ch, n, n), (steps.stride(0), *steps.stride()), 0)
    low_w, low_b = w.to(torch.bfloat16), b.to(torch.bfloat16)
    buf = torch.empty(B, 2 * Ch, n, n, device="cuda", dtype=torch.bfloat16,
                      memory_format=torch.channels_last).fill_(7.0)
    with torch.no_grad():
        got = resident_attention(windows, low_w, low_b, FB, out=buf[:, Ch:])
    assert got is not None and got.data_ptr() == buf[:, Ch:].data_ptr()
    assert (buf[:, :Ch] == 7).all()
    oracle = ref.temporal_attention(ref.convlstm(windows.double().contiguous(), w, b, FB))
    yardstick = _rel(ref.temporal_attention(ref.convlstm(windows.contiguous(), low_w, low_b, FB)), oracle)
    assert _rel(buf[:, Ch:], oracle) <= 2 * yardstick + 1e-3
    assert _rel(buf[:, Ch:], _two_kernels(windows, low_w, low_b)) <= 2e-3


@needs_cuda
def test_declines_what_it_does_not_take(monkeypatch):
    _skip_unless_it_runs(32, 6)
    x, w, b = (t.to(torch.bfloat16) for t in _inputs(4, 5, 32, 6, seed=1))
    with torch.no_grad():
        assert resident_attention(x, w, b, FB) is not None
        assert resident_attention(x.float(), w.float(), b.float(), FB) is None  # float32: the two kernels
        long = torch.cat([x, x], dim=1)[:, :resident_lstm.MAX_ATTENTION_STEPS + 1]
        assert resident_attention(long, w, b, FB) is None
        assert resident_attention(x, w, b, FB, out=torch.empty(4, 32, 6, 6, device="cuda",
                                                               dtype=torch.bfloat16)) is None  # NCHW out
    assert resident_attention(x, w.requires_grad_(), b, FB) is None  # autograd needs every h_t
    monkeypatch.setenv("MSCRED_RESIDENT_ATTENTION", "0")
    with torch.no_grad():
        assert resident_attention(x, w, b, FB) is None


@needs_cuda
def test_replayed_from_a_cuda_graph():
    _skip_unless_it_runs(64, 15)
    x, w, b = (t.to(torch.bfloat16) for t in _inputs(256, 5, 64, 15, seed=5))
    with torch.no_grad():
        resident_attention(x, w, b, FB)  # build and warm up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = resident_attention(x, w, b, FB)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, resident_attention(x, w, b, FB), rtol=0, atol=0)


@needs_cuda
def test_scoring_with_it_on_and_off(monkeypatch):
    """The whole model's bf16 scoring of consecutive windows (``forward_windows``): with the fused attention as
    with the two kernels, to the bf16 attention's rounding."""
    _skip_unless_it_runs(32, 30)
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(backend="fused")).cuda().eval()
    segments = torch.randn(40, 3, 30, 30, device="cuda")
    calls, real = [], resident_lstm.run_attention
    monkeypatch.setattr(resident_lstm, "run_attention", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        on = net.forward_windows(segments, 5)
        monkeypatch.setenv("MSCRED_RESIDENT_ATTENTION", "0")
        off = net.forward_windows(segments, 5)
    assert len(calls) == 2  # levels 1 and 2
    assert _rel(on, off) <= 1e-2
