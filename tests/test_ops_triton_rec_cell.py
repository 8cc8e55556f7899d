"""The recurrent convolution with the cell update in its epilogue (``convlstm_rec_cell``) against the split path
(cuDNN's convolution, then ``cell_fwd_kernel``) and the float64 reference.

On a CPU machine conftest.py switches on Triton's interpreter (small sizes); on a CUDA machine the bf16 rows run at
the training batch too.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from mscred.ops import reference as ref
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton import convlstm_rec_cell as rec_cell
# The fused ConvLSTM tests' device, marks (skip without Triton, strict float32), forget bias and inputs (gate
# pre-activations of order 1).
from test_ops_triton_convlstm import CUDA, FB, _inputs, pytestmark  # noqa: F401 (pytest reads pytestmark)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rec_cell_sass  # noqa: E402 (benchmarks/rec_cell_sass.py: the kernel's sm_90 configuration as launched)

needs_cuda = pytest.mark.skipif(not CUDA, reason="bf16 rows at the training batch need a CUDA device")
# On CUDA the fused step runs for bf16 / fp16 only (``runs``); its float64 and float32 arithmetic is checked where
# CI runs it, under the interpreter.
interpreter_only = pytest.mark.skipif(CUDA, reason="float64 / float32 take the split path on CUDA; the interpreter "
                                                   "(CI) runs the fused step in them")


def _train_outputs(x, w, b, setting, monkeypatch, time_major=False):
    """convlstm_train's four outputs (out, pre, cells, hprev) with MSCRED_LSTM_REC_CELL=``setting``."""
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", setting)
    if time_major:
        x = x.permute(1, 0, 3, 4, 2).contiguous().permute(1, 0, 4, 2, 3)
    xp, w_x, w_h = fused.train_inputs(x, w, "nhwc")
    with torch.no_grad():
        out, pre, cells, hprev = fused.convlstm_train(xp, w_x, w_h, b.to(x.dtype), FB, "nhwc")
    return out, pre[0], cells, hprev


# Pixel counts B*H*W that are not multiples of the pixel tile (the masked rows), k = 2 and 3, 16..64 channels
# (BC and BK cut to divide them), the input channels unlike the hidden ones.
SHAPES = [(3, 4, 16, 16, 5, 2), (2, 3, 8, 32, 4, 3), (5, 3, 32, 64, 3, 2), (1, 2, 4, 48, 7, 2)]


@interpreter_only
@pytest.mark.parametrize("B, T, C, Ch, n, k", SHAPES)
@pytest.mark.parametrize("time_major", [False, True])
def test_fused_step_equals_split_path_in_float64(B, T, C, Ch, n, k, time_major, monkeypatch):
    """Every output the backward reads -- h, the gate pre-activations, every c_t and the zero-bordered h_{t-1}
    buffers, borders included -- equals the split path's in float64 (the same sums, another order)."""
    calls, real = [], rec_cell.step
    monkeypatch.setattr(rec_cell, "step", lambda *a: calls.append(1) or real(*a))
    x, w, b, _ = _inputs(B, T, C, Ch, n, k, seed=B + T + Ch + k)
    split = _train_outputs(x, w, b, "0", monkeypatch, time_major)
    assert calls == []
    ours = _train_outputs(x, w, b, "1", monkeypatch, time_major)
    assert len(calls) == T - 1  # every step but the first (h_{-1} = 0 has no recurrent convolution)
    for name, got, want in zip(("out", "pre", "cells", "hprev"), ours, split):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=name)


@interpreter_only
@pytest.mark.parametrize("B, T, C, Ch, n, k", SHAPES[:3])
def test_gradients_through_the_fused_step_equal_reference(B, T, C, Ch, n, k, monkeypatch):
    """h and the gradients of x, the weight and the bias (the backward reads what the fused step stored) equal
    the float64 reference's."""
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "1")
    x, w, b, dout = _inputs(B, T, C, Ch, n, k, seed=7 * B + Ch)
    got, want = [], []
    for fn, sink in ((fused.convlstm, got), (ref.convlstm, want)):
        xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
        y = fn(xs, ws, bs, FB)
        sink.extend([y.detach(), *torch.autograd.grad(y, (xs, ws, bs), dout)])
    for name, g_, w_ in zip(("h", "dx", "dweight", "dbias"), got, want):
        torch.testing.assert_close(g_, w_, rtol=1e-10, atol=1e-10, msg=name)


@interpreter_only
def test_inference_takes_the_fused_step(monkeypatch):
    """Inference's per-step path (no stored pre-activations, one cell buffer updated in place) takes it too and
    gives the reference's h."""
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "1")
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM", "0")
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "0")
    calls, real = [], rec_cell.step
    monkeypatch.setattr(rec_cell, "step", lambda *a: calls.append(1) or real(*a))
    x, w, b, _ = _inputs(2, 4, 8, 32, 5, 2, seed=3)
    with torch.no_grad():
        y = fused.convlstm(x, w, b, FB)
    assert len(calls) == 3
    torch.testing.assert_close(y, ref.convlstm(x, w, b, FB), rtol=1e-10, atol=1e-10)


def test_setting(monkeypatch):
    """MSCRED_LSTM_REC_CELL: 0 / 1 / channel counts; channels-last and Ch a multiple of 16 only; float32 never on
    CUDA; a malformed value is refused by name."""
    cpu = torch.device("cpu")
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "1")
    assert rec_cell.runs(torch.float64, "nhwc", 32, cpu)
    assert not rec_cell.runs(torch.float64, "nchw", 32, cpu)
    assert not rec_cell.runs(torch.float64, "nhwc", 24, cpu)
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "128,256")
    assert rec_cell.runs(torch.float64, "nhwc", 128, cpu) and not rec_cell.runs(torch.float64, "nhwc", 64, cpu)
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "0")
    assert not rec_cell.runs(torch.float64, "nhwc", 128, cpu)
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "all")
    with pytest.raises(ValueError, match="MSCRED_LSTM_REC_CELL"):
        rec_cell.runs(torch.float64, "nhwc", 128, cpu)
    monkeypatch.setenv("MSCRED_LSTM_REC_CELL", "1")
    monkeypatch.setattr(rec_cell, "interpreting", lambda: False)
    assert not rec_cell.runs(torch.float32, "nhwc", 128, torch.device("cuda"))
    assert rec_cell.runs(torch.bfloat16, "nhwc", 128, torch.device("cuda"))
    monkeypatch.delenv("MSCRED_LSTM_REC_CELL")  # the default: levels 3-4 of the default model on CUDA
    assert [ch for ch in (32, 64, 128, 256) if rec_cell.runs(torch.bfloat16, "nhwc", ch, torch.device("cuda"))] == [
        128, 256]
    assert not rec_cell.runs(torch.bfloat16, "nhwc", 128, torch.device("cuda"), training=False)  # scoring: not
    assert not rec_cell.runs(torch.bfloat16, "nhwc", 128, cpu)
    monkeypatch.setenv("MSCRED_REC_CELL_TILE", "128/32/64/8")
    with pytest.raises(ValueError, match="MSCRED_REC_CELL_TILE"):
        rec_cell.tile(128)
    monkeypatch.setenv("MSCRED_REC_CELL_TILE", "128/64/64/8/3")
    assert rec_cell.tile(48) == (128, 16, 16, 8, 3)
    monkeypatch.setenv("MSCRED_REC_CELL_TILE", "128:128/32/64/8/3;256:64/16/32/4/4")
    assert rec_cell.tile(128) == (128, 32, 64, 8, 3) and rec_cell.tile(256)[1:] == (16, 32, 4, 4)
    assert rec_cell.tile(64) == rec_cell.tile(64) and rec_cell.tile(64)[1:] == rec_cell.DEFAULT_TILE[1:]


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 64, 15), (128, 128, 8), (128, 256, 4), (7, 128, 8)])
def test_bf16_training_batch_on_gpu(B, C, n, monkeypatch):
    """bf16 at the default model's levels 2-4: h, the gradients and the stored state of the fused step stay within
    the split path's distance to the float64 oracle (2x, plus a floor of bf16 roundings)."""
    x, w, b, dout = _inputs(B, 5, C, C, n, 2, seed=C + B)
    oracle = []
    xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = ref.convlstm(xs, ws, bs, FB)
    oracle = [y.detach(), *torch.autograd.grad(y, (xs, ws, bs), dout)]
    errs = {}
    for setting in ("0", str(C)):
        monkeypatch.setenv("MSCRED_LSTM_REC_CELL", setting)
        low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
        xs, ws, bs = (t.detach().clone().requires_grad_() for t in low[:3])
        y = fused.convlstm(xs, ws, bs, FB)
        got = [y.detach(), *torch.autograd.grad(y, (xs, ws, bs), low[3])]
        errs[setting] = [((g_.double() - o).norm() / o.norm()).item() for g_, o in zip(got, oracle)]
    for name, new, old in zip(("h", "dx", "dweight", "dbias"), errs[str(C)], errs["0"]):
        assert new <= 2 * old + 2e-3, f"{name}: fused step {new:.3g} vs split path {old:.3g}"


@pytest.mark.parametrize("ch", sorted(rec_cell.TILES))
def test_adopted_tiles_compile_to_warpgroup_mma_within_the_h200(ch):
    """Each adopted tile, compiled for sm_90 here (the interpreter checks no hardware limit): its shared memory
    within the H200's 227 KB, its dot on Hopper's warpgroup MMAs (HGMMA), no more than 255 registers a thread."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    code = sm90_compile.compiled_code("mscred.ops.triton.convlstm_rec_cell", "rec_cell_fwd_kernel",
                                      rec_cell_sass.kernel_config(rec_cell.TILES[ch]))
    assert code["shared"] <= sm90_compile.HOPPER_SHARED_MEMORY, code["shared"]
    assert "HGMMA" in code["listing"]
    assert code["registers"] <= 255
