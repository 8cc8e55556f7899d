"""A ConvLSTM level and its temporal attention in one kernel (``ops/lstm_attention.py``, the resident kernel's
``forward_attention``): bf16 inference of levels 1-2.

On the CPU: where it declines (so the two-kernel path runs), before any cast; which outputs it writes in place
(each condition alone); that the model asks for it first and falls back; and that its step bound is the kernel
header's. On a CUDA machine: against the float64 oracle (``reference.temporal_attention`` of
``reference.convlstm``) within twice the bf16 reference's error, and against the two kernels it replaces (the same
bf16 maps, the attention summed in another order), at the model's shapes and awkward ones (1 to 5 steps,
batches below and above twice the SM count so that blocks reuse their maps and scratch slot, a single pixel); into
a channel slice of the decoder's concatenation buffer, leaving the other half alone; torch.library.opcheck;
replayed from a CUDA graph; and the whole model's inference with it on and off.
"""
from __future__ import annotations

import re

import pytest
import torch

from mscred import model
from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops import lstm_attention
from mscred.ops import reference as ref
from mscred.ops import resident_lstm
from mscred.ops.lstm_attention import resident_attention, takes
from mscred.ops.triton import attention as fused_attention
from mscred.ops.triton import convlstm as fused
from resident_helpers import level_inputs, rel, skip_unless_it_runs

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
    """Channels contiguous, the pixels at one stride (a multiple of 8, at least Ch), bf16, 16-byte aligned: a dense
    channels-last map, or the attention half of the decoder's (B, 2Ch, H, W) channels-last concatenation buffer. Each
    refused case breaks one condition only."""
    cl, bf16 = torch.channels_last, torch.bfloat16
    fits = resident_lstm.attention_output_fits

    def strided(size, stride):
        return torch.empty(4096, dtype=bf16).as_strided(size, stride)

    dense = torch.empty(4, 32, 5, 5, dtype=bf16, memory_format=cl)
    assert fits(dense) and fits(torch.empty(4, 64, 5, 5, dtype=bf16, memory_format=cl)[:, 32:])
    assert fits(strided((2, 8, 2, 2), (40, 1, 16, 8)))                   # the reference for the cases below
    assert not fits(dense.float())                                       # not bf16
    assert not fits(strided((2, 8, 2, 2), (40, 2, 32, 16)))              # channels not contiguous
    assert not fits(dense[:, :, :, :4])                                  # rows not W pixels apart
    assert not fits(torch.empty(1, 44, 5, 5, dtype=bf16, memory_format=cl)[:, 8:])  # pixels 44 apart
    assert not fits(strided((2, 16, 2, 2), (64, 1, 16, 8)))              # pixels 8 apart, 16 channels: overlap
    assert not fits(strided((2, 8, 2, 2), (36, 1, 16, 8)))               # windows 36 apart
    assert not fits(torch.empty(4, 40, 5, 5, dtype=bf16, memory_format=cl)[:, 4:36])  # data 8 bytes off


def _takes_on_the_cpu(monkeypatch):
    """``takes`` with ``resident_lstm.runs`` answered by ``resident_lstm.takes`` (what it checks but the device)."""
    monkeypatch.setattr(resident_lstm, "runs", lambda dtype, layout, save, ch, k, hw, device:
                        resident_lstm.takes(dtype, layout, save, ch, k, hw))
    return takes


def test_declines_without_work_where_it_must(monkeypatch):
    """What the one kernel takes, checked before any cast (a declined call costs nothing): no backward to be
    needed, bf16 after autocast, at most 5 steps, an ``out`` it writes as it is, channels-last buffers, switched on."""
    takes_here = _takes_on_the_cpu(monkeypatch)
    monkeypatch.setattr(lstm_attention.fused, "cast_inputs", lambda *a: pytest.fail("cast before the checks"))
    bf16 = torch.bfloat16
    x = torch.randn(3, 5, 32, 6, 6).to(bf16)
    w = torch.randn(128, 64, 2, 2, requires_grad=True)
    b = torch.zeros(128, requires_grad=True)
    out = torch.empty(3, 32, 6, 6, dtype=bf16, memory_format=torch.channels_last)
    assert not takes_here(x, w, b, None)                      # grad enabled and trainable weights: training
    with torch.no_grad():
        assert takes_here(x, w, b, None) and takes_here(x, w, b, out)  # eval under no_grad, as scoring runs it
        assert not takes_here(x.float(), w, b, None)          # float32
        assert not takes_here(torch.cat([x, x], 1)[:, :6], w, b, None)  # 6 steps
        assert not takes_here(x, w, b, out[:2])               # out of another shape
        assert not takes_here(x, w, b, out.float())           # out of another dtype
        assert not takes_here(x, w, b, out.contiguous())      # NCHW out
        assert not takes_here(x, w[:, :, :1, :1], b, None)   # a 1 x 1 kernel
        with torch.autocast("cpu", dtype=bf16):
            assert takes_here(x.float(), w, b, None)          # float32 input, bf16 under autocast
        with torch.autocast("cpu", dtype=torch.float16):
            assert not takes_here(x, w, b, None)              # fp16 autocast
        monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nchw")
        assert not takes_here(x, w, b, None)
        monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
        monkeypatch.setenv("MSCRED_RESIDENT_ATTENTION", "0")
        assert not takes_here(x, w, b, None)
    with torch.inference_mode():
        monkeypatch.delenv("MSCRED_RESIDENT_ATTENTION")
        assert takes_here(x, w, b, None)
        assert resident_attention(torch.cat([x, x], 1), w, b, FB) is None  # declined: no cast, nothing computed


def test_the_model_asks_for_it_first(monkeypatch):
    """AttnConvLSTM (fused backend) returns the one kernel's output, hands it the decoder's buffer when scoring, and
    runs the ConvLSTM and the attention apart when it declines."""
    lstm = model.AttnConvLSTM(4, ModelConfig(backend="fused"))
    x = torch.randn(2, 5, 4, 5, 5)
    sentinel = torch.full((2, 4, 5, 5), 3.0)
    asked = []
    monkeypatch.setattr(model, "runs_fused", lambda t: True)
    monkeypatch.setattr(model, "resident_attention", lambda *a, **k: asked.append(a) or sentinel)
    assert lstm(x) is sentinel
    out = torch.empty(2, 4, 5, 5)
    assert lstm.forward_sliding(x, out) is sentinel and asked[-1][-1] is out
    monkeypatch.setattr(model, "resident_attention", lambda *a, **k: None)
    monkeypatch.setattr(model, "runs_fused", lambda t: False)  # so that the CPU takes the reference ops
    with torch.no_grad():
        expect = ref.temporal_attention(ref.convlstm(x, lstm.weight, lstm.bias, lstm.forget_bias))
        torch.testing.assert_close(lstm(x), expect)


# ----------------------------------------------------------------------------------------------------------------
# On the GPU
# ----------------------------------------------------------------------------------------------------------------
def _two_kernels(x, w, b):
    """The path it replaces: the resident kernel's every h_t, then the Triton attention kernel."""
    with torch.no_grad():
        return fused_attention.temporal_attention(fused.convlstm(x, w, b, FB))


@needs_cuda
@pytest.mark.parametrize("B, T, Ch, n", [(128, 5, 32, 30), (128, 5, 64, 15), (300, 5, 32, 30), (140, 5, 64, 15),
                                         (7, 1, 32, 5), (5, 2, 64, 9), (3, 3, 32, 13), (140, 5, 64, 16),
                                         (2, 5, 32, 32), (1, 5, 32, 1), (133, 4, 64, 11)])
def test_against_float64_oracle_and_the_two_kernels(B, T, Ch, n):
    skip_unless_it_runs(Ch, n)
    x, w, b = level_inputs(B, T, Ch, Ch, n, seed=B + 10 * T + Ch + n)
    oracle = ref.temporal_attention(ref.convlstm(x, w, b, FB))
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    yardstick = rel(ref.temporal_attention(ref.convlstm(*low, FB)), oracle)
    with torch.no_grad():
        got = resident_attention(*low, FB)
    assert got is not None and got.dtype == torch.bfloat16 and got.shape == oracle.shape
    assert got.is_contiguous(memory_format=torch.channels_last) and torch.isfinite(got).all()
    assert rel(got, oracle) <= 2 * yardstick + 1e-3, (rel(got, oracle), yardstick)
    assert rel(got, _two_kernels(*low)) <= 2e-3


@needs_cuda
@pytest.mark.parametrize("extra, T, Ch, n", [(3, 3, 32, 13), (1, 1, 64, 9), (5, 2, 32, 7)])
def test_blocks_take_several_windows(extra, T, Ch, n):
    """Past twice the SM count every block takes three windows, reusing its maps and scratch slot: with one
    scratch map (3 steps), none (1 and 2 steps)."""
    skip_unless_it_runs(Ch, n)
    B = 2 * torch.cuda.get_device_properties(0).multi_processor_count + extra
    x, w, b = level_inputs(B, T, Ch, Ch, n, seed=B + T)
    oracle = ref.temporal_attention(ref.convlstm(x, w, b, FB))
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    yardstick = rel(ref.temporal_attention(ref.convlstm(*low, FB)), oracle)
    with torch.no_grad():
        got = resident_attention(*low, FB)
    assert rel(got, oracle) <= 2 * yardstick + 1e-3, (rel(got, oracle), yardstick)
    assert rel(got, _two_kernels(*low)) <= 2e-3


@needs_cuda
def test_opcheck_of_the_mutating_op():
    """torch.library.opcheck of mscred::convlstm_attention_resident: schema (``out`` mutated, nothing returned), fake
    kernel, autograd registration; into a fresh map and into a channel slice of the decoder's buffer."""
    skip_unless_it_runs(32, 6)
    x, w, b = (t.to(torch.bfloat16) for t in level_inputs(4, 5, 32, 32, 6, seed=2))
    fresh = torch.empty(4, 32, 6, 6, device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last)
    buf = torch.zeros(4, 64, 6, 6, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    for out in (fresh, buf[:, 32:]):
        torch.library.opcheck(lstm_attention.convlstm_attention_resident, (x, w, b.float(), FB, out),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@needs_cuda
def test_sliding_windows_into_the_decoders_buffer():
    """Scoring's call: sliding windows of shared steps, the output written into the attention half of a channels-
    last (B, 2Ch, H, W) buffer, the other half left as it was."""
    B, T, Ch, n = 300, 5, 32, 30
    skip_unless_it_runs(Ch, n)
    x, w, b = level_inputs(B + T - 1, 1, Ch, Ch, n, seed=3)
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
    yardstick = rel(ref.temporal_attention(ref.convlstm(windows.contiguous(), low_w, low_b, FB)), oracle)
    assert rel(buf[:, Ch:], oracle) <= 2 * yardstick + 1e-3
    assert rel(buf[:, Ch:], _two_kernels(windows, low_w, low_b)) <= 2e-3


@needs_cuda
def test_declines_what_it_does_not_take(monkeypatch):
    skip_unless_it_runs(32, 6)
    x, w, b = (t.to(torch.bfloat16) for t in level_inputs(4, 5, 32, 32, 6, seed=1))
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
    skip_unless_it_runs(64, 15)
    x, w, b = (t.to(torch.bfloat16) for t in level_inputs(256, 5, 64, 64, 15, seed=5))
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
@pytest.mark.parametrize("call", ["forward_windows", "forward"])
def test_the_model_with_it_on_and_off(call, monkeypatch):
    """The whole model's bf16 inference, under autocast with float32 master weights that require grad (eval under
    no_grad, as scoring runs it): consecutive windows (``forward_windows``, shared segments) and stacked windows
    (``forward``), with the fused attention as with the two kernels, to the bf16 attention's rounding."""
    skip_unless_it_runs(32, 30)
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(backend="fused")).cuda().eval()
    segments = torch.randn(40, 3, 30, 30, device="cuda")
    windows = segments.unfold(0, 5, 1).permute(0, 4, 1, 2, 3)  # (36, 5, 3, 30, 30)

    def run():
        return net.forward_windows(segments, 5) if call == "forward_windows" else net(windows)

    calls, real = [], resident_lstm.run_attention
    monkeypatch.setattr(resident_lstm, "run_attention", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        on = run()
        monkeypatch.setenv("MSCRED_RESIDENT_ATTENTION", "0")
        off = run()
    assert len(calls) == 2  # levels 1 and 2
    assert rel(on, off) <= 1e-2
